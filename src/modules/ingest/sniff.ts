import { Readable } from 'node:stream';
import { validationError } from '../../domain/errors.ts';
import { parseMimeList } from '../../lib/mime.ts';
import { checkMime, SNIFF_BYTES } from '../pipeline/mime-check.ts';
import type { Project } from '../projects/schemas.ts';
import type { UploadTokenRow } from '../uploads/token-repo.ts';
import type { TypeField } from './rules.ts';

/** Whether the token or the project limits the types a file may have (`*\/*` limits nothing). */
export function restrictsTypes(project: Project, token: UploadTokenRow | undefined): boolean {
  const list = project.settings.allowed_mime_types;
  const entries = list === null ? undefined : parseMimeList(list);
  const projectLimits = entries !== undefined && 'entries' in entries && !entries.entries.includes('*/*');
  return projectLimits || (token !== undefined && !token.allowed_mime_types.includes('*/*'));
}

/**
 * Reads the head of a stream the server receives itself and checks it against the declared type
 * before a byte is stored, so an allowlist cannot be passed by declaring an allowed type for other
 * bytes. Answers a stream of the same bytes, head included; a refusal names `field`, where the type was declared.
 */
export async function screenHead(
  body: Readable,
  declared: string,
  filename: string,
  field: TypeField = 'content_type',
): Promise<Readable> {
  const source = body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const held: Buffer[] = [];
  let size = 0;
  while (size < SNIFF_BYTES) {
    const next = await source.next();
    if (next.done) break;
    held.push(next.value);
    size += next.value.length;
  }
  const mismatch = await checkMime(declared, Buffer.concat(held, size).subarray(0, SNIFF_BYTES), filename);
  if (mismatch) {
    // The rest is left unread: the edge that refuses the request decides what becomes of its body.
    throw validationError(`The content does not match its type: ${mismatch}`, { field, [field]: declared });
  }
  return Readable.from(
    (async function* () {
      let ended = false;
      try {
        yield* held;
        for (let next = await source.next(); !next.done; next = await source.next()) yield next.value;
        ended = true;
      } finally {
        // Given up before its end (the reader failed): the source is let go of too.
        if (!ended) await source.return?.();
      }
    })(),
    { objectMode: false },
  );
}
