import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { cycleLines, importCycles } from '../../scripts/import-cycles.ts';

it('has no import cycle in src/ or packages/client/src/, type-only imports included', async () => {
  const { cycles, unresolved } = await importCycles();
  expect(unresolved, 'imports the check cannot follow').toEqual([]);
  expect(cycleLines(cycles), 'import cycles').toEqual([]);
});

it('sees a cycle of type-only imports, with .ts and .js specifiers', async () => {
  const root = mkdtempSync(join(tmpdir(), 'coffer-cycles-'));
  try {
    mkdirSync(join(root, 'src'));
    writeFileSync(join(root, 'src/a.ts'), `import type { B } from './b.ts';\nexport interface A { b: B }\n`);
    writeFileSync(join(root, 'src/b.ts'), `import type { A } from './a.js';\nexport interface B { a?: A }\n`);
    writeFileSync(join(root, 'src/c.ts'), `import type { A } from './a.ts';\nexport type C = A;\n`);
    const { cycles, unresolved } = await importCycles(root, ['src']);
    expect(unresolved).toEqual([]);
    expect(cycles.map((cycle) => [...cycle].sort())).toEqual([['src/a.ts', 'src/b.ts']]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
