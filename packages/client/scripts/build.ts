/**
 * Builds dist/ with the workspace root's TypeScript (tsc -p packages/client), from a clean
 * directory, then copies the generated schema.d.ts beside the declarations that import it
 * (tsc never copies .d.ts inputs).
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const at = (path: string) => fileURLToPath(new URL(path, import.meta.url));
// The root's compiler: this package's own typescript (5.x) is there only for openapi-typescript.
const tsc = at('../../../node_modules/typescript/bin/tsc');

rmSync(at('../dist'), { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', at('..')], { stdio: 'inherit' });
copyFileSync(at('../src/schema.d.ts'), at('../dist/schema.d.ts'));
