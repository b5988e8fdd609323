/**
 * Builds dist/ from a clean directory: index.html, the script and the style sheet (their names carry
 * a hash of their content, so that they can be cached for good) and the icon. Typechecks first with
 * the workspace root's TypeScript; bundles with esbuild, @coffer/client's browser entry included.
 *
 *   npm run build:console     (also run by npm install and before npm test)
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const at = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const dist = at('../dist/');
const tsc = at('../../../node_modules/typescript/bin/tsc');

execFileSync(process.execPath, [tsc, '-p', at('..')], { stdio: 'inherit' });

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
const result = await build({
  entryPoints: { console: at('../src/main.ts'), styles: at('../src/styles.css') },
  bundle: true,
  minify: true,
  format: 'esm',
  platform: 'browser',
  target: ['chrome120', 'firefox121'],
  entryNames: '[name]-[hash]',
  outdir: dist,
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});

/** The file name an entry was written to. */
const outputOf = (entry: string) => {
  const found = Object.entries(result.metafile.outputs).find(([, output]) =>
    output.entryPoint?.endsWith(entry),
  );
  if (!found) throw new Error(`esbuild wrote nothing for ${entry}`);
  return basename(found[0]);
};

const page = readFileSync(at('../src/index.html'), 'utf8')
  .replace('%SCRIPT%', `/console/${outputOf('src/main.ts')}`)
  .replace('%STYLES%', `/console/${outputOf('src/styles.css')}`);
writeFileSync(`${dist}index.html`, page);
copyFileSync(at('../src/icon.svg'), `${dist}icon.svg`);
process.stdout.write(`console built in ${dist}\n`);
