import { createHash } from 'node:crypto';
import {
  CompleteMultipartUploadCommand,
  type CompleteMultipartUploadCommandInput,
  CreateMultipartUploadCommand,
  type CreateMultipartUploadCommandInput,
  GetObjectCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  S3Client,
  type S3ClientConfig,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import { StoreError } from '../../src/infra/storage/object-store.ts';
import { Sha256 } from '../../src/protocols/s3/canonical.ts';
import { ADMIN_KEY, cofferForSuite, type TestCoffer, type TestProject } from './coffer.ts';

/** A long-lived S3 credential of `projectId` with `scopes`, made with the admin key. */
export async function newS3Credential(
  coffer: TestCoffer,
  projectId: string,
  scopes: string[],
  name = 'test',
): Promise<{ id: string; access_key_id: string; secret_access_key: string }> {
  const created = await coffer.call('POST', `/v1/projects/${projectId}/s3-credentials`, {
    token: ADMIN_KEY,
    body: { name, scopes },
  });
  if (created.status !== 201) throw new Error(`S3 credential refused: ${JSON.stringify(created.body)}`);
  return created.body;
}

/**
 * The headers of a request to `coffer`'s S3 endpoint signed with `keys` as an SDK signs it, for a
 * request an SDK would not send as it is (Host is the client's own).
 */
export async function signedHeaders(
  coffer: TestCoffer,
  keys: [string, string],
  request: { method: string; path: string; query?: Record<string, string>; headers: Record<string, string> },
): Promise<Record<string, string>> {
  const { hostname, port, host } = new URL(coffer.url);
  const signed = await new SignatureV4({
    credentials: { accessKeyId: keys[0], secretAccessKey: keys[1] },
    region: 'us-east-1',
    service: 's3',
    sha256: Sha256,
    uriEscapePath: false,
  }).sign({
    method: request.method,
    protocol: 'http:',
    hostname,
    port: Number(port),
    path: request.path,
    query: request.query ?? {},
    headers: { host, ...request.headers },
  });
  const { host: _host, ...headers } = signed.headers;
  return headers;
}

/** The AWS SDK's S3 client on Coffer's endpoint (path-style at /s3), signing with `credential`. */
export function s3ClientOf(
  coffer: TestCoffer,
  credential: { access_key_id: string; secret_access_key: string; session_token?: string },
  options: Partial<S3ClientConfig> = {},
): S3Client {
  return new S3Client({
    endpoint: `${coffer.url}/s3`,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: {
      accessKeyId: credential.access_key_id,
      secretAccessKey: credential.secret_access_key,
      sessionToken: credential.session_token,
    },
    ...options,
  });
}

export const md5 = (data: Buffer | string) => createHash('md5').update(data).digest('hex');

/** The bytes of an SDK answer's body. */
export const text = async (body: unknown) =>
  Buffer.from(await (body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());

/** The S3 error an SDK call was refused with, and its message. */
export async function refusalWithMessage(
  promise: Promise<unknown>,
): Promise<{ code: string; status: number | undefined; message: string }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof S3ServiceException)
      return { code: error.name, status: error.$metadata.httpStatusCode, message: error.message };
    throw error;
  }
  throw new Error('the request was not refused');
}

/** The S3 error an SDK call was refused with. */
export async function refusal(
  promise: Promise<unknown>,
): Promise<{ code: string; status: number | undefined }> {
  const { code, status } = await refusalWithMessage(promise);
  return { code, status };
}

export interface Bucket {
  project: TestProject;
  name: string;
  client: S3Client;
  /** The client's access key id and secret. */
  keys: [string, string];
}

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * What S3 shows of `Key` in `bucket`: its bytes (or the error code of the GetObject), the ETags the
 * bucket lists, and the version ids of its versions.
 */
export async function shownOf({ client, name }: Bucket, Key: string) {
  const listed = await client.send(new ListObjectsV2Command({ Bucket: name }));
  const versions = await client.send(new ListObjectVersionsCommand({ Bucket: name }));
  const got = await client
    .send(new GetObjectCommand({ Bucket: name, Key }))
    .then(async (object) => (await text(object.Body)).toString())
    .catch((error: unknown) => (error as S3ServiceException).name);
  return {
    got,
    listed: (listed.Contents ?? []).map((object) => [object.Key, object.ETag]),
    versions: (versions.Versions ?? []).map((version) => version.VersionId),
  };
}

/**
 * The helpers of a suite that drives the S3 endpoint of `coffer`: the server the suite starts in its
 * `beforeAll`, read when a helper runs.
 */
export function s3EndpointOf(coffer: () => TestCoffer) {
  /** A client signing with the credential given, trying each request once, logging nothing. */
  function clientFor(
    accessKeyId: string,
    secretAccessKey: string,
    sessionToken?: string,
    config: S3ClientConfig = {},
  ): S3Client {
    const credential = {
      access_key_id: accessKeyId,
      secret_access_key: secretAccessKey,
      session_token: sessionToken,
    };
    return s3ClientOf(coffer(), credential, { ...config, maxAttempts: 1, logger: quiet });
  }

  /** A new project, its bucket, and a client holding an S3 credential with `scopes`. */
  async function bucketWith(
    settings: Record<string, unknown> = {},
    scopes = ['files:read', 'files:upload', 'files:delete'],
  ): Promise<Bucket> {
    const project = await coffer().newProject(settings);
    const created = await newS3Credential(coffer(), project.id, scopes);
    const { bucket } = (await project.call('GET', '')).body;
    return {
      project,
      name: bucket,
      client: clientFor(created.access_key_id, created.secret_access_key),
      keys: [created.access_key_id, created.secret_access_key],
    };
  }

  /**
   * Makes the store's next writes run `cutIns`, one each, in turn, once its bytes are stored and before
   * the write is recorded: a write that lands between a write's check and its record. Answers the
   * undoing function.
   */
  function cutInAfterNextWrite(...cutIns: (() => Promise<unknown>)[]): () => void {
    const { store } = coffer().services;
    const write = store.write;
    let next = 0;
    store.write = async (...args: Parameters<typeof store.write>) => {
      const cutIn = cutIns[next++];
      const written = await write.apply(store, args);
      await cutIn?.();
      return written;
    };
    return () => {
      store.write = write;
    };
  }

  /**
   * A multipart upload of `body` at `Key` in one part whose CompleteMultipartUpload the store assembles,
   * then loses the answer of and answers nothing more, as a crash there would leave it: the complete
   * is refused 503 and the upload stays completing, for the reaper. `create` and `complete` add to
   * those requests. Answers the upload's id.
   */
  async function strandCompletion(
    { client, name }: Bucket,
    Key: string,
    {
      body = 'parts',
      create = {},
      complete = {},
    }: {
      body?: string;
      create?: Partial<CreateMultipartUploadCommandInput>;
      complete?: Partial<CompleteMultipartUploadCommandInput>;
    } = {},
  ): Promise<string> {
    const { UploadId } = await client.send(
      new CreateMultipartUploadCommand({ Bucket: name, Key, ContentType: 'text/plain', ...create }),
    );
    const part = await client.send(
      new UploadPartCommand({ Bucket: name, Key, UploadId, PartNumber: 1, Body: body }),
    );
    const { store } = coffer().services;
    const { completeMultipart, head } = store;
    store.completeMultipart = async (...args: Parameters<typeof store.completeMultipart>) => {
      await completeMultipart.apply(store, args);
      // From now on, not before: a store may look at the key itself while it assembles.
      store.head = () => Promise.reject(new StoreError('Unavailable', 'The store did not answer'));
      throw new StoreError('Unavailable', 'The answer of the store was lost');
    };
    try {
      const answer = client.send(
        new CompleteMultipartUploadCommand({
          Bucket: name,
          Key,
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
          ...complete,
        }),
      );
      const refused = await refusal(answer);
      if (refused.code !== 'ServiceUnavailable' || refused.status !== 503)
        throw new Error(`the complete was answered ${JSON.stringify(refused)}`);
    } finally {
      store.completeMultipart = completeMultipart;
      store.head = head;
    }
    return UploadId!;
  }

  /** The entries of `project`'s audit log of `action`, as the admin reads them. */
  async function auditOf(project: TestProject, action: string): Promise<unknown[]> {
    const log = await coffer().call('GET', `/v1/projects/${project.id}/audit-log?action=${action}`, {
      token: ADMIN_KEY,
    });
    return log.body.items;
  }

  return { clientFor, bucketWith, cutInAfterNextWrite, strandCompletion, auditOf };
}

/**
 * A Coffer with `env` for the tests of the file this is called in (started in its `beforeAll`, closed in
 * its `afterAll`), and the helpers of its S3 endpoint.
 */
export function s3EndpointSuite(env?: Record<string, string>) {
  const coffer = cofferForSuite(env);
  return { coffer, ...s3EndpointOf(() => coffer) };
}
