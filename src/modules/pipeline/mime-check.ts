import { constants, createGunzip } from 'node:zlib';
import { fileTypeFromBuffer, supportedMimeTypes } from 'file-type';

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

/** The first SNIFF_BYTES that the gzip stream `head` begins inflate to, or undefined when it does not inflate. */
async function inflatedHead(head: Buffer): Promise<Buffer | undefined> {
  // A sync flush at the end: the head is a cut stream, not a broken one.
  const gunzip = createGunzip({ finishFlush: constants.Z_SYNC_FLUSH });
  gunzip.end(head);
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    for await (const chunk of gunzip) {
      chunks.push(chunk as Buffer);
      length += (chunk as Buffer).length;
      if (length >= SNIFF_BYTES) break;
    }
  } catch {
    return undefined;
  }
  return Buffer.concat(chunks).subarray(0, SNIFF_BYTES);
}

/**
 * Compares the leading bytes of a file with its declared content type. Returns undefined when
 * they agree, or the reason they do not. Formats file-type cannot recognise are accepted as
 * declared, except that a textual type must not hold binary bytes. A file named *.gz may be
 * declared as what it holds, as Python's `mimetypes` names `backup.tar.gz` application/x-tar: then
 * what it holds is compared.
 */
export async function checkMime(
  declared: string,
  head: Buffer,
  filename: string,
): Promise<string | undefined> {
  if (declared === 'application/octet-stream' || head.length === 0) return undefined;
  const expected = canonical(declared);
  const detected = await fileTypeFromBuffer(head);
  if (detected?.mime === 'application/gzip' && expected !== detected.mime && /\.gz$/i.test(filename)) {
    const inner = await inflatedHead(head);
    if (!inner) return `declared ${declared} but the content is gzip that does not inflate`;
    return checkMime(declared, inner, filename.slice(0, -3));
  }
  if (TEXTUAL.test(expected)) {
    // file-type knows a few textual formats (vCard): only another format is binary here.
    if ((detected && canonical(detected.mime) !== expected) || !looksTextual(head)) {
      return `declared ${declared} but the content is binary${detected ? ` (${detected.mime})` : ''}`;
    }
    return undefined;
  }
  if (detected) {
    const actual = canonical(detected.mime);
    if (actual === expected || CONTAINERS[actual]?.includes(expected)) return undefined;
    return `declared ${declared} but the content is ${detected.mime}`;
  }
  if (supportedMimeTypes.has(expected)) return `declared ${declared} but the content is not ${declared}`;
  return undefined;
}
