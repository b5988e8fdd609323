import type { Transform } from 'node:stream';
import { constants, createBrotliDecompress, createGunzip, createZstdDecompress } from 'node:zlib';
import { fileTypeFromBuffer, supportedMimeTypes } from 'file-type';
import { type Compression, compressionOf, extensionNames } from '../files/rules.ts';

/** How many leading bytes are sniffed: enough for every signature file-type knows. */
export const SNIFF_BYTES = 64 * 1024;

// Declared types that name the same format as file-type's canonical one.
const ALIASES: Record<string, string> = {
  'image/jpg': 'image/jpeg',
  'image/pjpeg': 'image/jpeg',
  'image/x-png': 'image/png',
  'audio/mp3': 'audio/mpeg',
  'audio/x-wav': 'audio/wav',
  'audio/wave': 'audio/wav',
  'application/x-zip-compressed': 'application/zip',
  'application/x-gzip': 'application/gzip',
  'application/x-pdf': 'application/pdf',
  'video/x-matroska': 'video/matroska',
  'text/x-vcard': 'text/vcard',
};

// Formats that are ZIP (or OLE) containers: their bytes may sniff as the container.
const CONTAINERS: Record<string, string[]> = {
  'application/zip': [
    'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    'application/vnd.openxmlformats-officedocument.presentationml.presentation',
    'application/epub+zip',
    'application/java-archive',
    'application/vnd.oasis.opendocument.text',
    'application/vnd.oasis.opendocument.spreadsheet',
    'application/vnd.oasis.opendocument.presentation',
  ],
  'application/x-cfb': ['application/msword', 'application/vnd.ms-excel', 'application/vnd.ms-powerpoint'],
};

const TEXTUAL =
  /^(?:text\/|application\/(?:json|xml|javascript|x-ndjson|yaml|x-yaml|csv|sql|graphql)$|[^/]+\/[^;]+\+(?:json|xml)$)/;

const canonical = (type: string) => ALIASES[type] ?? type;

/** Whether the bytes look like text: no NUL bytes, and valid UTF-8 apart from a cut at the end. */
function looksTextual(head: Buffer): boolean {
  if (head.includes(0)) return false;
  const decoded = new TextDecoder('utf-8', { fatal: false }).decode(head);
  const replacements = decoded.match(/\uFFFD/g)?.length ?? 0;
  return replacements <= 3;
}

/**
 * Each compression a suffix names: the type file-type detects its bytes as (brotli has no
 * signature), and its decoder where Node has one. A decoder flushes at the end of its input, as
 * the head is a cut stream, not a broken one.
 */
const COMPRESSED: Record<Compression, { detected?: string; decoder?: () => Transform }> = {
  gz: {
    detected: 'application/gzip',
    decoder: () => createGunzip({ finishFlush: constants.Z_SYNC_FLUSH }),
  },
  zst: {
    detected: 'application/zstd',
    decoder: () => createZstdDecompress({ finishFlush: constants.ZSTD_e_flush }),
  },
  br: { decoder: () => createBrotliDecompress({ finishFlush: constants.BROTLI_OPERATION_FLUSH }) },
  bz2: { detected: 'application/x-bzip2' },
  xz: { detected: 'application/x-xz' },
};

/** Types a compressed file may be declared as when its bytes cannot be decoded to be looked at. */
const ARCHIVES = new Set(['application/x-tar', 'application/x-cpio', 'application/x-gtar']);

/** The first SNIFF_BYTES that `head` decodes to, or undefined when it does not decode. */
async function decodedHead(decoder: Transform, head: Buffer): Promise<Buffer | undefined> {
  decoder.end(head);
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    for await (const chunk of decoder) {
      chunks.push(chunk as Buffer);
      length += (chunk as Buffer).length;
      if (length >= SNIFF_BYTES) break;
    }
  } catch {
    return undefined;
  }
  return Buffer.concat(chunks).subarray(0, SNIFF_BYTES);
}

/** Why the leading bytes do not agree with the declared type, or undefined when they do. */
function compare(declared: string, head: Buffer, detected: string | undefined): string | undefined {
  const expected = canonical(declared);
  if (TEXTUAL.test(expected)) {
    // file-type knows a few textual formats (vCard): only another format is binary here.
    if ((detected && canonical(detected) !== expected) || !looksTextual(head)) {
      return `declared ${declared} but the content is binary${detected ? ` (${detected})` : ''}`;
    }
    return undefined;
  }
  if (detected) {
    const actual = canonical(detected);
    if (actual === expected || CONTAINERS[actual]?.includes(expected)) return undefined;
    return `declared ${declared} but the content is ${detected}`;
  }
  if (supportedMimeTypes.has(expected)) return `declared ${declared} but the content is not ${declared}`;
  return undefined;
}

/**
 * Compares the leading bytes of a file with its declared content type. Returns undefined when
 * they agree, or the reason they do not. Formats file-type cannot recognise are accepted as
 * declared, except that a textual type must not hold binary bytes. A file named with a compression
 * suffix may be declared as what it holds, as Python's `mimetypes` names `backup.tar.xz` and
 * `backup.tgz` application/x-tar: then, when its bytes are in that compression, what they hold is
 * compared.
 */
export async function checkMime(
  declared: string,
  head: Buffer,
  filename: string,
): Promise<string | undefined> {
  if (declared === 'application/octet-stream' || head.length === 0) return undefined;
  const detected = (await fileTypeFromBuffer(head))?.mime;
  const mismatch = compare(declared, head, detected);
  const compressed = mismatch === undefined ? undefined : compressionOf(filename);
  if (!compressed) return mismatch;
  const { compression, inner } = compressed;
  const { detected: signature, decoder } = COMPRESSED[compression];
  if (detected !== signature) return mismatch;
  const held = decoder && (await decodedHead(decoder(), head));
  if (held?.length) return checkMime(declared, held, inner);
  // Brotli bytes are known to be brotli only by decoding to something.
  if (signature === undefined) return mismatch;
  if (decoder && !held) return `declared ${declared} but the content is ${detected} that does not decode`;
  // bzip2 and xz have no decoder in Node, and a zstd block larger than the head decodes to nothing
  // until it is whole: what the bytes hold cannot be seen. A signature of a few bytes proves little,
  // so only an archive is taken on the name's word (`backup.tar.xz` as application/x-tar, as Python
  // names it): served as an archive, its content is never shown as anything else. A wrapped image or
  // page (`x.png.bz2` as image/png) is refused, as it was before names were unwrapped.
  if (ARCHIVES.has(canonical(declared)) && extensionNames(inner, declared)) return undefined;
  return `declared ${declared} but the content is ${detected} of a file named ${JSON.stringify(inner)}`;
}
