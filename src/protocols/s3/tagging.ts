import type { FileRow } from '../../modules/files/repo.ts';
import type { Services } from '../../services.ts';
import { bodyOf, MAX_XML_BYTES, type Operation, readAll, requireScope, type S3Call, xml } from './call.ts';
import { checkVersionId, contentOf } from './content.ts';
import { noSuchKey, noSuchVersion, notImplemented } from './errors.ts';
import { isMarkerKey } from './markers.ts';
import { fileAt, markerShown, type ObjectServices } from './objects.ts';
import { setFileTags, tagSetOf, tagsOfDocument } from './tags.ts';

/**
 * What a tagging operation names: a folder marker (no file), or the file S3 shows at the key, with
 * the version `versionId` asks for, when it is one of the file's (the file's tags are every version's);
 * NoSuchKey or NoSuchVersion otherwise.
 */
async function taggedAt(
  services: ObjectServices,
  { caller, target, query }: S3Call,
): Promise<{ file?: FileRow; versionId?: string }> {
  const versionId = query.get('versionId');
  checkVersionId(versionId);
  if (isMarkerKey(target.key)) {
    if (!(await markerShown(services, caller, target.key.slice(0, -1)))) throw noSuchKey();
    if (versionId !== null && versionId !== 'null') throw noSuchVersion();
    return {};
  }
  const file = await fileAt(services, caller, target.key);
  const content = await contentOf(services, caller, file, { key: target.key, versionId });
  return { file, versionId: content.versionId };
}

/**
 * GetObjectTagging, PutObjectTagging and DeleteObjectTagging, on the tags of the file at the key (a
 * folder has none, and takes none). Changing them takes the scope the REST API's tag endpoints take
 * (see requireScope).
 */
export function taggingOperations(services: Services): Record<string, Operation> {
  return {
    'GET object?tagging': async (call) => {
      requireScope(call.caller, 'files:read');
      const { file, versionId } = await taggedAt(services, call);
      if (versionId) call.reply.header('x-amz-version-id', versionId);
      return xml(call.reply, 'Tagging', { TagSet: tagSetOf(file?.tags ?? []) });
    },

    'PUT object?tagging': async (call) => {
      const { request, reply, caller, auth } = call;
      requireScope(caller, 'files:update_metadata');
      const tags = tagsOfDocument(await readAll(bodyOf(request, auth), MAX_XML_BYTES));
      const { file, versionId } = await taggedAt(services, call);
      if (file) await setFileTags(services, caller, file.id, tags);
      else if (tags.length > 0) throw notImplemented('Tags on a folder (a key ending in /)');
      if (versionId) reply.header('x-amz-version-id', versionId);
      return reply.send();
    },

    'DELETE object?tagging': async (call) => {
      const { reply, caller } = call;
      requireScope(caller, 'files:update_metadata');
      const { file, versionId } = await taggedAt(services, call);
      if (file) await setFileTags(services, caller, file.id, []);
      if (versionId) reply.header('x-amz-version-id', versionId);
      return reply.code(204).send();
    },
  };
}
