import type { Api, RequestOptions } from '../api.js';
import type { QueryOf } from '../openapi.js';
import type { DownloadUrl, FileList, FileObject, ListFilesQuery } from '../types.js';

/** Rendition parameters (width, height, fit, format, quality, animated), as GET …/render takes them. */
export type RenditionOptions = QueryOf<'/v1/projects/{project_id}/files/{file_id}/render', 'get'>;

export interface DownloadOptions extends RequestOptions {
  /** URL lifetime in seconds, 60 to 86400 (ignored when the project requires signed URLs). */
  ttl?: number;
  /** A URL of this rendition of an image instead of the file's bytes: embeddable, no key needed. */
  rendition?: RenditionOptions;
}

export interface FilesApi {
  get(projectId: string, fileId: string, options?: RequestOptions): Promise<FileObject>;
  /** One page, newest first. */
  list(projectId: string, query?: ListFilesQuery, options?: RequestOptions): Promise<FileList>;
  /** Every file matching `query`, page after page by cursor (`limit` sets the page size). */
  iterate(projectId: string, query?: ListFilesQuery, options?: RequestOptions): AsyncGenerator<FileObject>;
  downloadUrl(projectId: string, fileId: string, options?: DownloadOptions): Promise<DownloadUrl>;
  /** Soft delete: answers the file with `deleted_at` set. */
  delete(projectId: string, fileId: string, options?: RequestOptions): Promise<FileObject>;
  setTags(projectId: string, fileId: string, tags: string[], options?: RequestOptions): Promise<FileObject>;
  addTags(projectId: string, fileId: string, tags: string[], options?: RequestOptions): Promise<FileObject>;
  setMetadata(
    projectId: string,
    fileId: string,
    metadata: Record<string, unknown>,
    options?: RequestOptions,
  ): Promise<FileObject>;
  /** Shallow merge into the current metadata. */
  mergeMetadata(
    projectId: string,
    fileId: string,
    metadata: Record<string, unknown>,
    options?: RequestOptions,
  ): Promise<FileObject>;
  /** To a folder, or to the project root with null. */
  move(
    projectId: string,
    fileId: string,
    folderId: string | null,
    options?: RequestOptions,
  ): Promise<FileObject>;
  setLegalHold(
    projectId: string,
    fileId: string,
    reason?: string,
    options?: RequestOptions,
  ): Promise<FileObject>;
  releaseLegalHold(projectId: string, fileId: string, options?: RequestOptions): Promise<FileObject>;
}

type FilesQuery = QueryOf<'/v1/projects/{project_id}/files', 'get'>;

/** The query as sent: a metadata filter object becomes its JSON. */
const listQuery = ({ metadata, ...query }: ListFilesQuery) =>
  ({
    ...query,
    ...(metadata === undefined
      ? {}
      : { metadata: typeof metadata === 'string' ? metadata : JSON.stringify(metadata) }),
  }) as FilesQuery;

export function filesApi(api: Api): FilesApi {
  const ids = (project_id: string, file_id: string) => ({ project_id, file_id });
  const list: FilesApi['list'] = (projectId, query = {}, options = {}) =>
    api.call('get', '/v1/projects/{project_id}/files', {
      params: { project_id: projectId },
      query: listQuery(query),
      ...options,
    });
  const tags =
    (method: 'put' | 'post') =>
    (projectId: string, fileId: string, tags: string[], options = {}) =>
      api.call(method, '/v1/projects/{project_id}/files/{file_id}/tags', {
        params: ids(projectId, fileId),
        body: { tags },
        ...options,
      });
  const metadata =
    (method: 'put' | 'post') =>
    (projectId: string, fileId: string, metadata: Record<string, unknown>, options = {}) =>
      api.call(method, '/v1/projects/{project_id}/files/{file_id}/metadata', {
        params: ids(projectId, fileId),
        body: { metadata },
        ...options,
      });
  return {
    get: (projectId, fileId, options = {}) =>
      api.call('get', '/v1/projects/{project_id}/files/{file_id}', {
        params: ids(projectId, fileId),
        ...options,
      }),
    list,
    async *iterate(projectId, query = {}, options = {}) {
      const { offset: _, ...rest } = query;
      let page = await list(projectId, query, options);
      for (;;) {
        yield* page.items;
        if (!page.has_more || !page.next_cursor) return;
        page = await list(projectId, { ...rest, cursor: page.next_cursor }, options);
      }
    },
    downloadUrl: (projectId, fileId, { ttl, rendition, ...options } = {}) =>
      api.call('get', '/v1/projects/{project_id}/files/{file_id}/download', {
        params: ids(projectId, fileId),
        query: { ttl, ...rendition },
        ...options,
      }),
    delete: (projectId, fileId, options = {}) =>
      api.call('delete', '/v1/projects/{project_id}/files/{file_id}', {
        params: ids(projectId, fileId),
        ...options,
      }),
    setTags: tags('put'),
    addTags: tags('post'),
    setMetadata: metadata('put'),
    mergeMetadata: metadata('post'),
    move: (projectId, fileId, folderId, options = {}) =>
      api.call('post', '/v1/projects/{project_id}/files/{file_id}/move', {
        params: ids(projectId, fileId),
        body: { folder_id: folderId },
        ...options,
      }),
    setLegalHold: (projectId, fileId, reason, options = {}) =>
      api.call('put', '/v1/projects/{project_id}/files/{file_id}/legal-hold', {
        params: ids(projectId, fileId),
        body: reason === undefined ? {} : { reason },
        ...options,
      }),
    releaseLegalHold: (projectId, fileId, options = {}) =>
      api.call('delete', '/v1/projects/{project_id}/files/{file_id}/legal-hold', {
        params: ids(projectId, fileId),
        ...options,
      }),
  };
}
