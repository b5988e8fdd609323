/** What the sections of the S3 API benchmark share: a project's bucket through Coffer's S3 endpoint, and timing. */
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { call, type createProject, expectStatus } from './client.ts';
import type { CofferServer } from './coffer-server.ts';
import { ADMIN_KEY } from './lib.ts';
import { sdkClient } from './s3-server.ts';

export const CONTENT_TYPE = 'application/octet-stream';
/** Off: the endpoint's per-address and per-credential limits would cap every rate measured here. */
export const NO_RATE_LIMITS = {
  COFFER_RATE_LIMIT_OBJECTS_PER_MINUTE: '0',
  COFFER_RATE_LIMIT_API_KEY_PER_MINUTE: '0',
  COFFER_RATE_LIMIT_IP_PER_MINUTE: '0',
};

export type Project = Awaited<ReturnType<typeof createProject>>;

export interface Bucket {
  name: string;
  client: S3Client;
}

/** The bucket of a project and an SDK client of `server`'s /s3 with a new long-lived S3 credential. */
export async function s3Bucket(server: CofferServer, projectId: string): Promise<Bucket> {
  const admin = { token: ADMIN_KEY };
  const info = await call<{ bucket: string }>('GET', `${server.url}/v1/projects/${projectId}`, admin);
  expectStatus(info, 200, 'get project');
  const credential = await call('POST', `${server.url}/v1/projects/${projectId}/s3-credentials`, {
    ...admin,
    body: { name: 'bench', scopes: ['files:read', 'files:upload', 'files:delete'] },
  });
  expectStatus(credential, 201, 'create S3 credential');
  const client = sdkClient({
    endpoint: `${server.url}/s3`,
    region: 'us-east-1',
    accessKeyId: credential.body.access_key_id,
    secretAccessKey: credential.body.secret_access_key,
  });
  return { name: info.body.bucket, client };
}

export interface Sides {
  coffer: { client: S3Client; bucket: string };
  sdk: { client: S3Client; bucket: string };
}

export const seconds = (start: number) => (performance.now() - start) / 1000;

export async function drainObject(
  client: S3Client,
  bucket: string,
  key: string,
  size: number,
): Promise<void> {
  const { Body } = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  let received = 0;
  for await (const chunk of Body as AsyncIterable<Uint8Array>) received += chunk.length;
  if (received !== size) throw new Error(`GetObject ${key}: ${received} of ${size} bytes`);
}
