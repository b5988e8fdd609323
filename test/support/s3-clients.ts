import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { ADMIN_KEY, cofferForSuite, type TestCoffer, type TestProject } from './coffer.ts';
import { drain } from './pipeline.ts';

/** Runs a program, answering its output once it exits 0. */
export const run = promisify(execFile);

/**
 * The S3 clients users already run, as Debian ships them (.ci/s3-clients.sh installs them in CI and
 * names them in COFFER_TEST_*).
 */
export const clients = {
  aws: process.env.COFFER_TEST_AWS,
  rclone: process.env.COFFER_TEST_RCLONE,
  s3cmd: process.env.COFFER_TEST_S3CMD,
  python: process.env.COFFER_TEST_PYTHON_BOTO3,
};

/** A bucket a client is set up for: its project, name, S3 credential, endpoint and a scratch folder. */
export interface Setup {
  project: TestProject;
  bucket: string;
  accessKeyId: string;
  secret: string;
  endpoint: string;
  dir: string;
}

/** The helpers of a suite driving `coffer` (read when a helper runs) with real S3 clients. */
export function s3ClientsOf(coffer: () => TestCoffer) {
  /** A new project, its bucket and a long-lived S3 credential reading, writing and deleting. */
  async function setup(settings?: Parameters<TestCoffer['newProject']>[0]): Promise<Setup> {
    const project = await coffer().newProject(settings);
    const created = await coffer().call('POST', `/v1/projects/${project.id}/s3-credentials`, {
      token: ADMIN_KEY,
      body: { name: 'clients', scopes: ['files:read', 'files:upload', 'files:delete'] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return {
      project,
      bucket: (await project.call('GET', '')).body.bucket,
      accessKeyId: created.body.access_key_id,
      secret: created.body.secret_access_key,
      endpoint: `${coffer().url}/s3`,
      dir: mkdtempSync(join(tmpdir(), 'coffer-s3-client-')),
    };
  }

  /** The project's ready files by S3 key (folder path and name), as the REST API shows them. */
  async function filesOf(
    project: TestProject,
  ): Promise<Map<string, { size_bytes: number; checksum_sha256: string }>> {
    // Bytes assembled by a store that does not hash them (S3) get their checksum from a digest job.
    await drain(coffer().services.pipeline);
    const paths = new Map<string, string>();
    const pathOf = async (folderId: string) => {
      if (!paths.has(folderId))
        paths.set(folderId, (await project.call('GET', `/folders/${folderId}`)).body.path);
      return paths.get(folderId)!;
    };
    const found = new Map<string, { size_bytes: number; checksum_sha256: string }>();
    for (const file of (await project.call('GET', '/files?limit=100')).body.items) {
      if (file.status !== 'ready') continue;
      found.set(file.folder_id ? `${await pathOf(file.folder_id)}/${file.filename}` : file.filename, file);
    }
    return found;
  }

  return { setup, filesOf };
}

/**
 * A Coffer for the tests of the file this is called in (started in its `beforeAll`, closed in its
 * `afterAll`), and the helpers that set real S3 clients on it.
 */
export function s3ClientsSuite() {
  const coffer = cofferForSuite();
  return { coffer, ...s3ClientsOf(() => coffer) };
}
