import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { cofferForSuite } from '../../support/coffer.ts';
import { newS3Credential } from '../../support/s3-endpoint.ts';

// The S3 clients name each file's type by its extension from the system's tables before sending it:
// the aws cli (Python's mimetypes) from Debian's /etc/mime.types, rclone (Go's mime) from
// shared-mime-info where it is installed. S3 stores whatever type is sent; Coffer, which refuses a type
// its extension contradicts, must take the ones these tables name. The clients are Debian's, as
// .ci/s3-clients.sh installs them and names them in COFFER_TEST_*.
const run = promisify(execFile);
const aws = process.env.COFFER_TEST_AWS;
const rclone = process.env.COFFER_TEST_RCLONE;

const coffer = cofferForSuite();

/** Files whose types Debian's mime.types, shared-mime-info or Python name otherwise than mime-db. */
const NAMES = [
  'cert.pem',
  'signing.key',
  'id_ed25519.pub',
  'tool.deb',
  'setup.msi',
  'setup.exe',
  'run.bat',
  'disk.iso',
  'clip.m4v',
  'photo.jfif',
  'photo.heic',
  'song.mid',
  'backup.bz2',
  'script.pl',
];

async function setup() {
  const project = await coffer.newProject();
  const credential = await newS3Credential(coffer, project.id, ['files:read', 'files:upload']);
  const dir = mkdtempSync(join(tmpdir(), 'coffer-s3-types-'));
  const local = join(dir, 'typed');
  mkdirSync(local);
  for (const name of NAMES) writeFileSync(join(local, name), `${name}\n`);
  return {
    project,
    bucket: (await project.call('GET', '')).body.bucket as string,
    credential,
    dir,
    local,
    // Nothing of this machine's environment but PATH, and a home of its own.
    env: { PATH: process.env.PATH ?? '', HOME: dir },
  };
}

/** Every name stored, ready, as the REST API lists it. */
async function expectStored(s: Awaited<ReturnType<typeof setup>>) {
  const files = (await s.project.call('GET', '/files?limit=100')).body.items as {
    filename: string;
    status: string;
  }[];
  expect(files.map((file) => file.filename).sort()).toEqual([...NAMES].sort());
  for (const file of files) expect(file.status, file.filename).toBe('ready');
}

describe('the types clients name files by', () => {
  it.skipIf(!aws)('aws cli: takes every file of a folder, typed from Debian’s mime.types', async () => {
    const s = await setup();
    writeFileSync(
      join(s.dir, 'config'),
      ['[default]', 'region = us-east-1', 's3 =', '  addressing_style = path', ''].join('\n'),
    );
    await run(
      aws!,
      ['--endpoint-url', `${coffer.url}/s3`, 's3', 'cp', '--recursive', s.local, `s3://${s.bucket}/`],
      {
        env: {
          ...s.env,
          AWS_ACCESS_KEY_ID: s.credential.access_key_id,
          AWS_SECRET_ACCESS_KEY: s.credential.secret_access_key,
          AWS_CONFIG_FILE: join(s.dir, 'config'),
          AWS_SHARED_CREDENTIALS_FILE: join(s.dir, 'none'),
          AWS_EC2_METADATA_DISABLED: 'true',
        },
      },
    );
    await expectStored(s);
  });

  it.skipIf(!rclone)('rclone: takes every file of a folder, typed from shared-mime-info', async () => {
    const s = await setup();
    await run(rclone!, ['copy', s.local, `coffer:${s.bucket}`], {
      env: {
        ...s.env,
        RCLONE_CONFIG: join(s.dir, 'none.conf'),
        RCLONE_CONFIG_COFFER_TYPE: 's3',
        RCLONE_CONFIG_COFFER_PROVIDER: 'Other',
        RCLONE_CONFIG_COFFER_ACCESS_KEY_ID: s.credential.access_key_id,
        RCLONE_CONFIG_COFFER_SECRET_ACCESS_KEY: s.credential.secret_access_key,
        RCLONE_CONFIG_COFFER_ENDPOINT: `${coffer.url}/s3`,
        RCLONE_CONFIG_COFFER_REGION: 'us-east-1',
        RCLONE_CONFIG_COFFER_FORCE_PATH_STYLE: 'true',
      },
    });
    await expectStored(s);
  });
});
