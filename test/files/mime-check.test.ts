import { randomBytes } from 'node:crypto';
import { brotliCompressSync, gzipSync, zstdCompressSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { checkMime, SNIFF_BYTES } from '../../src/modules/pipeline/mime-check.ts';
import { PNG } from '../support/pipeline.ts';

// A tar header as file-type recognises one: the name, then the ustar magic.
const TAR = Buffer.alloc(1024);
TAR.write('notes.txt');
TAR.write('ustar\0', 257);
// `kept\n` compressed by xz and by bzip2, which Node has no encoder for.
const XZ = Buffer.from(
  'fd377a585a000004e6d6b4460200210116000000742fe5a30100046b6570740a000000005ec7882b5c89d75b00011d05b82d80af1fb6f37d010000000004595a',
  'hex',
);
const BZIP2 = Buffer.from(
  '425a6839314159265359f772a643000001418000100208440020002186819a0c537177245385090f772a6430',
  'hex',
);
const SVG = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>');
const TEXT = Buffer.from('plain notes\n'.repeat(100));
// A zstd block is decoded whole: text this random compresses to blocks longer than the head, which
// so decodes to nothing.
const LONG_ZSTD_BLOCK = zstdCompressSync(randomBytes(2 * SNIFF_BYTES).toString('base64')).subarray(
  0,
  SNIFF_BYTES,
);

describe('checkMime', () => {
  it.each([
    ['backup.tar.gz', 'application/x-tar', 'gzip, looked inside', gzipSync(TAR)],
    ['backup.tgz', 'application/x-tar', 'a tar shorthand', gzipSync(TAR)],
    ['backup.taz', 'application/x-tar', 'a tar shorthand', gzipSync(TAR)],
    ['BACKUP.TGZ', 'application/x-tar', 'a suffix in capitals', gzipSync(TAR)],
    ['backup.tgz', 'application/gzip', 'the compression', gzipSync(TAR)],
    ['drawing.svgz', 'image/svg+xml', 'compressed SVG', gzipSync(SVG)],
    ['backup.tar.zst', 'application/x-tar', 'zstd, looked inside', zstdCompressSync(TAR)],
    ['backup.tzst', 'application/x-tar', 'a tar shorthand', zstdCompressSync(TAR)],
    ['notes.txt.br', 'text/plain', 'brotli, looked inside', brotliCompressSync(TEXT)],
    ['pixel.png.br', 'image/png', 'bytes of the declared type under a compression suffix', PNG],
    ['backup.tar.xz', 'application/x-tar', 'xz, by name', XZ],
    ['backup.txz', 'application/x-tar', 'a tar shorthand', XZ],
    ['backup.tar.xz', 'application/x-xz', 'the compression', XZ],
    ['backup.tar.bz2', 'application/x-tar', 'bzip2, by name', BZIP2],
    ['backup.tbz2', 'application/x-tar', 'a tar shorthand', BZIP2],
    ['backup.tbz', 'application/x-tar', 'a tar shorthand', BZIP2],
    [
      'backup.tar.zst',
      'application/x-tar',
      'zstd whose head decodes to nothing yet, by name',
      LONG_ZSTD_BLOCK,
    ],
  ])('accepts %s as %s (%s)', async (filename, declared, _what, bytes) => {
    expect(await checkMime(declared, bytes, filename)).toBeUndefined();
  });

  it.each([
    ['photo.png', 'image/png', 'xz in a name without the suffix', XZ],
    // What undecodable bytes hold cannot be seen: only an archive is taken on its name's word.
    ['photo.png.bz2', 'image/png', 'bzip2 not looked inside, not an archive', BZIP2],
    ['notes.txt.bz2', 'text/plain', 'bzip2 not looked inside, not an archive', BZIP2],
    [
      'notes.txt.zst',
      'text/plain',
      'zstd whose head decodes to nothing yet, not an archive',
      LONG_ZSTD_BLOCK,
    ],
    ['backup.tar', 'application/x-tar', 'gzip in a name without the suffix', gzipSync(TAR)],
    ['backup.tar.xz', 'application/x-tar', 'gzip under the xz suffix', gzipSync(TAR)],
    ['backup.tbz2', 'application/x-tar', 'xz under a bzip2 shorthand', XZ],
    ['backup.tar.xz', 'image/png', 'a type the wrapped name does not have', XZ],
    ['backup.xz', 'application/x-tar', 'a wrapped name without an extension', XZ],
    ['backup.weird.xz', 'application/x-tar', 'a wrapped name of an unknown extension', XZ],
    ['backup.tgz', 'application/x-tar', 'gzip holding another format', gzipSync(PNG)],
    ['drawing.svgz', 'image/svg+xml', 'gzip holding binary for a textual type', gzipSync(PNG)],
    ['backup.tar.zst', 'application/x-tar', 'zstd holding another format', zstdCompressSync(PNG)],
    [
      'backup.tar.zst',
      'application/x-tar',
      'zstd that does not decode',
      Buffer.concat([zstdCompressSync(TAR).subarray(0, 4), randomBytes(64)]),
    ],
    ['notes.txt.br', 'text/plain', 'brotli holding binary for a textual type', brotliCompressSync(PNG)],
    ['notes.txt.br', 'text/plain', 'binary that is not brotli', Buffer.from([0x89, 0, 1, 2, 3])],
  ])('refuses %s as %s (%s)', async (filename, declared, _what, bytes) => {
    expect(await checkMime(declared, bytes, filename)).toMatch(/^declared /);
  });
});
