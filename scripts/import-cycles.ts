/**
 * The import cycles of Coffer's own code, in src/ and in packages/client/src/: none is allowed, and
 * `import type` counts as much as any import (as does a dynamic `import()`), since two modules that
 * name each other's types still cannot be understood, moved or split apart. dpdm reads every file
 * with TypeScript's parser and resolves each specifier as tsconfig.json says (`./x.ts`, and the
 * client's `./x.js` for x.ts).
 *
 *   npm run check:cycles     (also run by npm run check, and as test/architecture/import-cycles.test.ts)
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseCircular, parseDependencyTree } from 'dpdm';

const REPO = join(import.meta.dirname, '..');
/** The folders whose modules must import one another without a cycle. */
export const ROOTS = ['src', 'packages/client/src'];

export interface ImportGraph {
  /** Each cycle as the files along it (relative to the root), the last one importing the first. */
  cycles: string[][];
  /** Imports that resolve to no file, which the check cannot follow, as `file: specifier`. */
  unresolved: string[];
}

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The import cycles among the TypeScript files under `folders` of `root` (the repository by default). */
export async function importCycles(root = REPO, folders = ROOTS): Promise<ImportGraph> {
  const tree = await parseDependencyTree(
    folders.map((folder) => `${folder}/**/*.ts`),
    {
      cwd: root,
      context: root,
      tsconfig: join(REPO, 'tsconfig.json'),
      // Files elsewhere (packages, the client's dist/) are leaves: their own imports are not read.
      include: new RegExp(`^${literal(root)}/(${folders.map(literal).join('|')})/`),
      // Not transpiled first, which would drop the type-only imports.
      transform: false,
      skipDynamicImports: false,
    },
  );
  const unresolved: string[] = [];
  for (const [file, imports] of Object.entries(tree)) {
    for (const { request, id } of imports ?? []) {
      // A declaration file (the client's generated schema.d.ts) holds types only and imports nothing.
      const declaration = join(root, dirname(file), request.replace(/\.[cm]?[jt]s$/, '.d.ts'));
      if (id === null && !existsSync(declaration)) unresolved.push(`${file}: ${request}`);
    }
  }
  return { cycles: parseCircular(tree), unresolved };
}

/** One line a cycle, `a.ts -> b.ts -> a.ts`. */
export const cycleLines = (cycles: string[][]) => cycles.map((cycle) => [...cycle, cycle[0]].join(' -> '));

if (import.meta.main) {
  const { cycles, unresolved } = await importCycles();
  for (const line of unresolved) process.stderr.write(`unresolved import ${line}\n`);
  for (const line of cycleLines(cycles)) process.stderr.write(`import cycle: ${line}\n`);
  if (cycles.length > 0 || unresolved.length > 0) process.exitCode = 1;
  else process.stdout.write(`no import cycle in ${ROOTS.map((folder) => `${folder}/`).join(' or ')}\n`);
}
