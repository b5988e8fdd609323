import { fileTooLarge, validationError } from '../../domain/errors.ts';
import { MAX_PART_SIZE } from '../../infra/storage/object-store.ts';
import { randomUlid } from '../../lib/ids.ts';
import { mimeAllowed, parseMimeList } from '../../lib/mime.ts';
import { extensionMatches, normalizeTags } from '../files/rules.ts';
import type { Project } from '../projects/schemas.ts';
import type { UploadTokenRow } from '../uploads/token-repo.ts';

/** The request field a size came in, for errors (a multipart start's total_size_bytes, tus's Upload-Length). */
export type SizeField = 'size_bytes' | 'total_size_bytes' | 'Upload-Length';

/** The request field a content type came in, for errors (tus's Upload-Metadata key filetype). */
export type TypeField = 'content_type' | 'filetype';

/** The storage key of a new object: generated ids only, so user input never reaches a path. */
export function newObjectKey(projectId: string, fileId: string): string {
  return `${projectId}/${fileId}/${randomUlid()}`;
}

/** One PUT carries at most 5 GiB on every store (S3's limit); larger files go in parts. */
export function checkSingleUploadSize(size: number): void {
  if (size > MAX_PART_SIZE) {
    throw validationError(`A single upload holds at most ${MAX_PART_SIZE} bytes: use a multipart upload`, {
      field: 'size_bytes',
      max_size_bytes: MAX_PART_SIZE,
    });
  }
}

/** The 413 of `size` bytes past an upload token's size ceiling (a); undefined within it. */
export const pastTokenSize = (token: UploadTokenRow, size: number, sizeField: string) =>
  size > token.max_size ? fileTooLarge(token.max_size, 'token', sizeField) : undefined;

/** The 413 of `size` bytes past the project's size ceiling (f); undefined within it. */
export function pastProjectSize(project: Project, size: number, sizeField: string) {
  const { max_file_size_bytes } = project.settings;
  return max_file_size_bytes !== null && size > max_file_size_bytes
    ? fileTooLarge(max_file_size_bytes, 'project', sizeField)
    : undefined;
}

/** `tags` with an upload token's own merged in (its constraint (e)), duplicates removed. */
export function withTokenTags(
  tags: readonly string[],
  token: Pick<UploadTokenRow, 'tags'> | undefined,
): string[] {
  return normalizeTags([...tags, ...(token?.tags ?? [])]);
}

/** An upload token's constraints on the bytes (a)–(b): its size ceiling (413) and MIME allowlist (422). */
export function checkTokenRules(
  token: UploadTokenRow,
  contentType: string,
  size: number,
  sizeField: SizeField = 'size_bytes',
  typeField: TypeField = 'content_type',
): void {
  const tooLarge = pastTokenSize(token, size, sizeField);
  if (tooLarge) throw tooLarge;
  if (!mimeAllowed(token.allowed_mime_types, contentType)) {
    throw validationError(`${typeField} ${contentType} is not allowed by the upload token`, {
      field: typeField,
      allowed_mime_types: token.allowed_mime_types,
    });
  }
}

/** The project's configuration checks of an upload (f): size ceiling (413), MIME allowlist and extension (422). */
export function checkProjectRules(
  project: Project,
  filename: string,
  contentType: string,
  size: number,
  sizeField: SizeField = 'size_bytes',
  typeField: TypeField = 'content_type',
): void {
  const tooLarge = pastProjectSize(project, size, sizeField);
  if (tooLarge) throw tooLarge;
  const { allowed_mime_types } = project.settings;
  if (allowed_mime_types !== null) {
    const list = parseMimeList(allowed_mime_types);
    if ('entries' in list && !mimeAllowed(list.entries, contentType)) {
      throw validationError(`${typeField} ${contentType} is not allowed in this project`, {
        field: typeField,
        allowed_mime_types: list.entries,
      });
    }
  }
  if (!extensionMatches(filename, contentType)) {
    throw validationError(`The extension of ${JSON.stringify(filename)} does not match ${contentType}`, {
      field: 'filename',
      content_type: contentType,
    });
  }
}
