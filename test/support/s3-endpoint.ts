import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { ADMIN_KEY, type TestCoffer } from './coffer.ts';

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
