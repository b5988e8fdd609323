import type { Api, RequestOptions } from '../api.js';
import { invalidInput } from '../errors.js';
import { typeOfName } from '../mime.js';
import type { ProgressListener } from '../progress.js';
import { putWhole } from '../single.js';
import type { UploadSource } from '../source.js';
import type { PutTransport } from '../transport.js';
import type { DownloadUrl, FileObject, FileVersionList, VersionConfirmation } from '../types.js';
import type { DownloadOptions } from './files.js';

export interface VersionUploadOptions {
  /** Default: the Blob's type or the path's extension, else the file's current type. */
  contentType?: string;
  /** Bytes; required for streams. */
  size?: number;
  onProgress?: ProgressListener;
  signal?: AbortSignal;
}

export interface VersionsApi<Input> {
  /** Newest first; the project needs versioning_enabled (409 VERSIONING_DISABLED otherwise). */
  list(projectId: string, fileId: string, options?: RequestOptions): Promise<FileVersionList>;
  downloadUrl(
    projectId: string,
    fileId: string,
    versionId: string,
    options?: DownloadOptions,
  ): Promise<DownloadUrl>;
  /** Makes the version's content current again, recorded as a new version. */
  restore(
    projectId: string,
    fileId: string,
    versionId: string,
    options?: RequestOptions,
  ): Promise<FileObject>;
  /** New content for a ready file: it becomes current once stored (and scanned, when the project scans). */
  upload(
    projectId: string,
    fileId: string,
    input: Input,
    options?: VersionUploadOptions,
  ): Promise<VersionConfirmation>;
}

export interface VersionUploadContext<Input> {
  put: PutTransport;
  source(input: Input, size: number | undefined): Promise<UploadSource>;
}

export function versionsApi<Input>(api: Api, context: VersionUploadContext<Input>): VersionsApi<Input> {
  const ids = (project_id: string, file_id: string, version_id: string) => ({
    project_id,
    file_id,
    version_id,
  });
  return {
    list: (projectId, fileId, options = {}) =>
      api.call('get', '/v1/projects/{project_id}/files/{file_id}/versions', {
        params: { project_id: projectId, file_id: fileId },
        ...options,
      }),
    downloadUrl: (projectId, fileId, versionId, { ttl, ...options } = {}) =>
      api.call('get', '/v1/projects/{project_id}/files/{file_id}/versions/{version_id}/download', {
        params: ids(projectId, fileId, versionId),
        query: { ttl },
        ...options,
      }),
    restore: (projectId, fileId, versionId, options = {}) =>
      api.call('post', '/v1/projects/{project_id}/files/{file_id}/versions/{version_id}/restore', {
        params: ids(projectId, fileId, versionId),
        ...options,
      }),
    async upload(projectId, fileId, input, options = {}) {
      const { signal } = options;
      const source = await context.source(input, options.size);
      if (options.size !== undefined && options.size !== source.size) {
        throw invalidInput(`size is ${options.size} but the input holds ${source.size} bytes`);
      }
      const body = await source.read(0, source.size);
      await source.finish();
      const file = { project_id: projectId, file_id: fileId };
      const contentType =
        options.contentType ??
        source.type ??
        (source.name ? typeOfName(source.name) : undefined) ??
        // The URL is signed for the file's type when none is given: send exactly that one.
        (await api.call('get', '/v1/projects/{project_id}/files/{file_id}', { params: file, signal }))
          .content_type;
      const created = await api.call('post', '/v1/projects/{project_id}/files/{file_id}/versions', {
        params: file,
        body: { size_bytes: source.size, content_type: contentType },
        signal,
      });
      await putWhole(context.put, api.retry, {
        url: created.upload_url,
        body,
        contentType,
        size: source.size,
        options,
      });
      return api.call('post', '/v1/projects/{project_id}/files/{file_id}/versions/{version_id}/confirm', {
        params: ids(projectId, fileId, created.version_id),
        signal,
      });
    },
  };
}
