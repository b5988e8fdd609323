import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { expect, it } from 'vitest';

const LIMIT = 15 * 1024;

it(`bundles the browser upload path in at most ${LIMIT} bytes min+gzip, with no Node.js module`, async () => {
  const result = await build({
    stdin: {
      contents: `
        import { createClient } from '@coffer/client';
        const client = createClient({ baseUrl: 'https://files.example.com', token: 'coffer_upload_token_x' });
        export const send = (file, onProgress) => client.upload('proj_1', file, { onProgress, resume: true });
      `,
      resolveDir: process.cwd(),
      loader: 'js',
    },
    bundle: true,
    platform: 'browser',
    format: 'esm',
    minify: true,
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const code = result.outputFiles[0]!.contents;
  const inputs = Object.keys(result.metafile.inputs);
  // The browser condition picks the default entry; nothing of the Node.js entry comes along.
  expect(inputs).toContain('packages/client/dist/index.js');
  expect(inputs.filter((input) => /dist\/node(\.js|\/)/.test(input))).toEqual([]);
  expect(Buffer.from(code).toString()).not.toMatch(/\bnode:/);
  const gzipped = gzipSync(code, { level: 9 }).length;
  process.stdout.write(`browser upload bundle: ${code.length} bytes minified, ${gzipped} bytes gzipped\n`);
  expect(gzipped).toBeLessThanOrEqual(LIMIT);
});
