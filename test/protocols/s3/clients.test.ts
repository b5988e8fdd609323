import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, startCoffer, type TestCoffer, type TestProject } from '../../support/coffer.ts';
import { opaqueBytes, sha256 } from '../../support/files.ts';
import { drain } from '../../support/pipeline.ts';

// The S3 clients users already run, as Debian ships them (.ci/s3-clients.sh installs them in CI and
// names them in COFFER_TEST_*): each uploads, lists, syncs and deletes through /s3, large files in
// parts, and every result is checked through Coffer's REST API.
const run = promisify(execFile);
const clients = {
  aws: process.env.COFFER_TEST_AWS,
  rclone: process.env.COFFER_TEST_RCLONE,
  s3cmd: process.env.COFFER_TEST_S3CMD,
  python: process.env.COFFER_TEST_PYTHON_BOTO3,
};

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(() => coffer.close());

const MiB = 1024 * 1024;

interface Setup {
  project: TestProject;
  bucket: string;
  accessKeyId: string;
  secret: string;
  endpoint: string;
  dir: string;
}

async function setup(settings?: Parameters<TestCoffer['newProject']>[0]): Promise<Setup> {
  const project = await coffer.newProject(settings);
  const created = await coffer.call('POST', `/v1/projects/${project.id}/s3-credentials`, {
    token: ADMIN_KEY,
    body: { name: 'clients', scopes: ['files:read', 'files:upload', 'files:delete'] },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return {
    project,
    bucket: (await project.call('GET', '')).body.bucket,
    accessKeyId: created.body.access_key_id,
    secret: created.body.secret_access_key,
    endpoint: `${coffer.url}/s3`,
    dir: mkdtempSync(join(tmpdir(), 'coffer-s3-client-')),
  };
}

/** The project's ready files by S3 key (folder path and name), as the REST API shows them. */
async function filesOf(
  project: TestProject,
): Promise<Map<string, { size_bytes: number; checksum_sha256: string }>> {
  // Bytes assembled by a store that does not hash them (S3) get their checksum from a digest job.
  await drain(coffer.services.pipeline);
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

/**
 * What a client process sees: nothing of this machine's environment but PATH (a CA bundle variable,
 * say, changes how some clients reach a plain-HTTP endpoint), a home of its own, and `vars`.
 */
const clientEnv = (s: Setup, vars: Record<string, string> = {}) => ({
  PATH: process.env.PATH ?? '',
  HOME: s.dir,
  ...vars,
});

/** A local folder of files: two small, one past every client's multipart threshold (set low below). */
function localTree(root: string): Record<string, Buffer> {
  const tree = {
    'a.txt': Buffer.from('alpha'),
    'sub/b.bin': opaqueBytes(4096, 'b'),
    'sub/deep/large.bin': opaqueBytes(12 * MiB + 3, 'large'),
  };
  for (const [path, data] of Object.entries(tree)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), data);
  }
  return tree;
}

async function expectStored(project: TestProject, prefix: string, tree: Record<string, Buffer>) {
  const stored = await filesOf(project);
  for (const [path, data] of Object.entries(tree)) {
    expect(stored.get(`${prefix}${path}`), path).toMatchObject({
      size_bytes: data.length,
      checksum_sha256: sha256(data),
    });
  }
}

/** The aws cli on `s`'s endpoint, with path-style addressing and the `s3` settings of `extra` lines. */
function awsCli(s: Setup, ...extra: string[]) {
  writeFileSync(
    join(s.dir, 'config'),
    ['[default]', 'region = us-east-1', 's3 =', '  addressing_style = path', ...extra, ''].join('\n'),
  );
  const env = clientEnv(s, {
    AWS_ACCESS_KEY_ID: s.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s.secret,
    AWS_CONFIG_FILE: join(s.dir, 'config'),
    AWS_SHARED_CREDENTIALS_FILE: join(s.dir, 'none'),
    AWS_EC2_METADATA_DISABLED: 'true',
  });
  return (...args: string[]) =>
    run(clients.aws!, ['--endpoint-url', s.endpoint, ...args], { env, maxBuffer: 16 * MiB });
}

describe.skipIf(!clients.aws)('aws cli', () => {
  it('copies, lists, syncs, presigns and removes, large files in parts', async () => {
    const s = await setup();
    const aws = awsCli(s, '  multipart_threshold = 5MB', '  multipart_chunksize = 5MB');
    const local = join(s.dir, 'tree');
    const tree = localTree(local);
    await aws('s3', 'cp', '--recursive', local, `s3://${s.bucket}/up/`);
    await expectStored(s.project, 'up/', tree);
    const listed = (await aws('s3', 'ls', '--recursive', `s3://${s.bucket}/up/`)).stdout;
    expect(listed).toContain('up/sub/deep/large.bin');
    await aws('s3', 'sync', local, `s3://${s.bucket}/synced/`);
    await expectStored(s.project, 'synced/', tree);
    const back = join(s.dir, 'back');
    await aws('s3', 'sync', `s3://${s.bucket}/synced/`, back);
    expect(sha256(readFileSync(join(back, 'sub/deep/large.bin')))).toBe(sha256(tree['sub/deep/large.bin']!));
    const url = (await aws('s3', 'presign', `s3://${s.bucket}/up/a.txt`, '--expires-in', '60')).stdout.trim();
    expect(await (await fetch(url)).text()).toBe('alpha');
    await aws('s3', 'rm', '--recursive', `s3://${s.bucket}/up/`);
    const left = await filesOf(s.project);
    expect([...left.keys()].filter((key) => key.startsWith('up/'))).toEqual([]);
  });

  it('copies an object past its multipart threshold within the bucket, in parts copied from it', async () => {
    const s = await setup();
    const aws = awsCli(s);
    const data = opaqueBytes(10 * MiB, 'copied');
    writeFileSync(join(s.dir, 'mp.bin'), data);
    await aws('s3', 'cp', join(s.dir, 'mp.bin'), `s3://${s.bucket}/mp.bin`);
    const copied = await aws(
      '--debug',
      's3',
      'cp',
      `s3://${s.bucket}/mp.bin`,
      `s3://${s.bucket}/mp-copy.bin`,
    );
    expect(copied.stderr).toContain('UploadPartCopy');
    const stored = await filesOf(s.project);
    for (const key of ['mp.bin', 'mp-copy.bin']) {
      expect(stored.get(key), key).toMatchObject({ size_bytes: data.length, checksum_sha256: sha256(data) });
    }
  });

  it("tags an object with s3api, and copies one in parts with its tags, as the file's tags", async () => {
    const s = await setup();
    const aws = awsCli(s);
    const api = async (...args: string[]) =>
      JSON.parse((await aws('s3api', ...args, '--bucket', s.bucket)).stdout || '{}');
    const data = opaqueBytes(10 * MiB, 'tagged');
    writeFileSync(join(s.dir, 'tagged.bin'), data);
    await aws('s3', 'cp', join(s.dir, 'tagged.bin'), `s3://${s.bucket}/tags/tagged.bin`);
    const tagSet = [
      { Key: 'project', Value: 'blue sky' },
      { Key: 'urgent', Value: '' },
    ];
    await api(
      'put-object-tagging',
      '--key',
      'tags/tagged.bin',
      '--tagging',
      JSON.stringify({ TagSet: tagSet }),
    );
    expect((await api('get-object-tagging', '--key', 'tags/tagged.bin')).TagSet).toEqual(tagSet);
    // Past its multipart threshold, the copy reads the source's tags and sends them with its
    // CreateMultipartUpload.
    const copied = await aws(
      '--debug',
      's3',
      'cp',
      `s3://${s.bucket}/tags/tagged.bin`,
      `s3://${s.bucket}/tags/copy.bin`,
    );
    expect(copied.stderr).toContain('UploadPartCopy');
    expect(copied.stderr).toContain("'x-amz-tagging': 'project=blue%20sky&urgent='");
    expect((await api('get-object-tagging', '--key', 'tags/copy.bin')).TagSet).toEqual(tagSet);
    const tagged = async (tag: string) =>
      (await s.project.call('GET', `/files?tags=${encodeURIComponent(tag)}`)).body.items.map(
        (file: { filename: string; tags: string[] }) => [file.filename, file.tags],
      );
    expect((await tagged('project=blue sky')).sort()).toEqual([
      ['copy.bin', ['project=blue sky', 'urgent']],
      ['tagged.bin', ['project=blue sky', 'urgent']],
    ]);
    await api('delete-object-tagging', '--key', 'tags/tagged.bin');
    expect(await tagged('urgent')).toEqual([['copy.bin', ['project=blue sky', 'urgent']]]);
  });

  it('uploads files with the types Python names them by: tarballs as tar, a script, C source, a card', async () => {
    // Scanned, so that each file's head is compared with its type too.
    const s = await setup({ virus_scan_enabled: true });
    const aws = awsCli(s);
    const local = join(s.dir, 'typed');
    mkdirSync(local);
    writeFileSync(join(s.dir, 'notes.txt'), 'kept\n');
    const tarballs = { 'backup.tar.gz': '-z', 'backup.tgz': '-z', 'backup.tar.xz': '-J' };
    for (const [name, compression] of Object.entries(tarballs))
      await run('tar', ['-c', compression, '-f', join(local, name), '-C', s.dir, 'notes.txt']);
    // Debian's /etc/mime.types, which Python's mimetypes reads, names these types; mime-db names others.
    const sent: Record<string, [Buffer, string]> = {
      ...Object.fromEntries(
        Object.keys(tarballs).map((name) => [name, [readFileSync(join(local, name)), 'application/x-tar']]),
      ),
      'build.sh': [Buffer.from('#!/bin/sh\necho built\n'), 'text/x-sh'],
      'main.c': [Buffer.from('int main(void) { return 0; }\n'), 'text/x-csrc'],
      'card.vcf': [Buffer.from('BEGIN:VCARD\nVERSION:4.0\nFN:Ada\nEND:VCARD\n'), 'text/vcard'],
    };
    for (const [name, [data]] of Object.entries(sent)) writeFileSync(join(local, name), data);
    const target = `s3://${s.bucket}/typed/`;
    await aws('s3', 'cp', '--recursive', local, target);
    await drain(coffer.services.pipeline);
    const stored = new Map<string, { status: string; content_type: string; size_bytes: number }>(
      (await s.project.call('GET', '/files?limit=100')).body.items.map((file: { filename: string }) => [
        file.filename,
        file,
      ]),
    );
    for (const [name, [data, type]] of Object.entries(sent)) {
      expect(stored.get(name), name).toMatchObject({
        status: 'ready',
        content_type: type,
        size_bytes: data.length,
      });
    }
  });

  it('heads a folder key it put, and lists none that a deleted key only implied', async () => {
    const s = await setup();
    const aws = awsCli(s);
    const api = async (...args: string[]) =>
      JSON.parse((await aws('s3api', ...args, '--bucket', s.bucket)).stdout || '{}');
    await aws('s3api', 'put-object', '--bucket', s.bucket, '--key', 'made/');
    expect(await api('head-object', '--key', 'made/')).toMatchObject({
      ContentLength: 0,
      ETag: '"d41d8cd98f00b204e9800998ecf8427e"',
    });
    mkdirSync(join(s.dir, 'tree/b/c'), { recursive: true });
    for (const path of ['1.txt', 'b/2.txt', 'b/c/3.txt']) writeFileSync(join(s.dir, 'tree', path), path);
    await aws('s3', 'cp', join(s.dir, 'tree/1.txt'), `s3://${s.bucket}/e1/e2/e3/f.txt`);
    await aws('s3', 'rm', `s3://${s.bucket}/e1/e2/e3/f.txt`);
    const keys = async () =>
      ((await api('list-objects-v2')).Contents ?? []).map((o: { Key: string }) => o.Key);
    expect(await keys()).toEqual(['made/']);
    await aws('s3', 'cp', '--recursive', join(s.dir, 'tree'), `s3://${s.bucket}/a/`);
    // One pass of listing and deleting empties the bucket: no key appears as the one under it goes.
    await aws('s3', 'rm', '--recursive', `s3://${s.bucket}/`);
    expect(await keys()).toEqual([]);
  });
});

describe.skipIf(!clients.rclone)('rclone', () => {
  const rcloneOf = (s: Setup) => {
    const env = clientEnv(s, {
      RCLONE_CONFIG: join(s.dir, 'none.conf'),
      RCLONE_CONFIG_COFFER_TYPE: 's3',
      RCLONE_CONFIG_COFFER_PROVIDER: 'Other',
      RCLONE_CONFIG_COFFER_ACCESS_KEY_ID: s.accessKeyId,
      RCLONE_CONFIG_COFFER_SECRET_ACCESS_KEY: s.secret,
      RCLONE_CONFIG_COFFER_ENDPOINT: s.endpoint,
      RCLONE_CONFIG_COFFER_REGION: 'us-east-1',
      RCLONE_CONFIG_COFFER_FORCE_PATH_STYLE: 'true',
    });
    return (...args: string[]) =>
      run(clients.rclone!, ['--s3-upload-cutoff', '5M', '--s3-chunk-size', '5M', ...args], {
        env,
        maxBuffer: 16 * MiB,
      });
  };

  it('copies, lists, checks and deletes, large files in parts', async () => {
    const s = await setup();
    const rclone = rcloneOf(s);
    const local = join(s.dir, 'tree');
    const tree = localTree(local);
    await rclone('copy', local, `coffer:${s.bucket}/rc`);
    await expectStored(s.project, 'rc/', tree);
    expect((await rclone('lsf', '-R', `coffer:${s.bucket}/rc`)).stdout).toContain('sub/deep/large.bin');
    await rclone('check', local, `coffer:${s.bucket}/rc`);
    await rclone('delete', `coffer:${s.bucket}/rc`);
    expect([...(await filesOf(s.project)).keys()].filter((key) => key.startsWith('rc/'))).toEqual([]);
  });

  it('copies a file into a project that scans uploads: it checks the upload with a HEAD while the scan runs', async () => {
    const s = await setup({ virus_scan_enabled: true });
    const data = opaqueBytes(4096, 'scanned');
    writeFileSync(join(s.dir, 'scanned.bin'), data);
    await rcloneOf(s)('copyto', join(s.dir, 'scanned.bin'), `coffer:${s.bucket}/scan/scanned.bin`);
    expect((await filesOf(s.project)).get('scan/scanned.bin')).toMatchObject({
      size_bytes: data.length,
      checksum_sha256: sha256(data),
    });
  });
});

describe.skipIf(!clients.s3cmd)('s3cmd', () => {
  it('puts, lists, gets and deletes, large files in parts', async () => {
    const s = await setup();
    const host = new URL(s.endpoint);
    writeFileSync(
      join(s.dir, 's3cfg'),
      [
        '[default]',
        `access_key = ${s.accessKeyId}`,
        `secret_key = ${s.secret}`,
        `host_base = ${host.host}/s3`,
        `host_bucket = ${host.host}/s3`,
        'use_https = False',
        'signature_v2 = False',
        'bucket_location = us-east-1',
        'multipart_chunk_size_mb = 5',
        '',
      ].join('\n'),
    );
    const s3cmd = (...args: string[]) =>
      run(clients.s3cmd!, ['-c', join(s.dir, 's3cfg'), ...args], { maxBuffer: 16 * MiB });
    const local = join(s.dir, 'tree');
    const tree = localTree(local);
    await s3cmd('put', '--recursive', `${local}/`, `s3://${s.bucket}/sc/`);
    await expectStored(s.project, 'sc/', tree);
    expect((await s3cmd('ls', '--recursive', `s3://${s.bucket}/sc/`)).stdout).toContain(
      'sc/sub/deep/large.bin',
    );
    const back = join(s.dir, 'large.bin');
    await s3cmd('get', `s3://${s.bucket}/sc/sub/deep/large.bin`, back);
    expect(sha256(readFileSync(back))).toBe(sha256(tree['sub/deep/large.bin']!));
    await s3cmd('del', '--recursive', '--force', `s3://${s.bucket}/sc/`);
    expect([...(await filesOf(s.project)).keys()].filter((key) => key.startsWith('sc/'))).toEqual([]);
  });
});

describe.skipIf(!clients.python)('boto3', () => {
  it('uploads with upload_file (in parts past its threshold), lists, downloads and presigns', async () => {
    const s = await setup();
    const data = opaqueBytes(9 * MiB + 1, 'big');
    writeFileSync(join(s.dir, 'big.bin'), data);
    const script = `
import sys, boto3, urllib.request
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
endpoint, key, secret, bucket, path, out = sys.argv[1:7]
s3 = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                  region_name='us-east-1', config=Config(signature_version='s3v4'))
config = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
s3.upload_file(path, bucket, 'py/big.bin', Config=config)
s3.put_object(Bucket=bucket, Key='py/small.txt', Body=b'small', Metadata={'from': 'boto3'})
print(sorted(o['Key'] for o in s3.list_objects_v2(Bucket=bucket, Prefix='py/')['Contents']))
s3.download_file(bucket, 'py/big.bin', out, Config=config)
url = s3.generate_presigned_url('get_object', Params={'Bucket': bucket, 'Key': 'py/small.txt'}, ExpiresIn=60)
print(urllib.request.urlopen(url).read().decode())
print(s3.head_object(Bucket=bucket, Key='py/small.txt')['Metadata'])
`;
    const out = join(s.dir, 'back.bin');
    const { stdout } = await run(clients.python!, [
      '-c',
      script,
      s.endpoint,
      s.accessKeyId,
      s.secret,
      s.bucket,
      join(s.dir, 'big.bin'),
      out,
    ]);
    expect(stdout.split('\n')).toEqual(["['py/big.bin', 'py/small.txt']", 'small', "{'from': 'boto3'}", '']);
    expect(sha256(readFileSync(out))).toBe(sha256(data));
    expect((await filesOf(s.project)).get('py/big.bin')).toMatchObject({
      size_bytes: data.length,
      checksum_sha256: sha256(data),
    });
  });

  it('empties a versioned bucket with object_versions.delete(), every version of every key', async () => {
    const s = await setup({ versioning_enabled: true });
    const script = `
import sys, boto3
from botocore.config import Config
endpoint, key, secret, bucket = sys.argv[1:5]
s3 = boto3.resource('s3', endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                    region_name='us-east-1', config=Config(signature_version='s3v4'))
b = s3.Bucket(bucket)
for body in (b'one', b'two', b'three'):
    b.put_object(Key='kept/a.txt', Body=body)
b.put_object(Key='b.txt', Body=b'only')
print(len(list(b.object_versions.all())))
b.object_versions.delete()
print(len(list(b.object_versions.all())), len(list(b.objects.all())))
`;
    const { stdout } = await run(clients.python!, [
      '-c',
      script,
      s.endpoint,
      s.accessKeyId,
      s.secret,
      s.bucket,
    ]);
    expect(stdout.split('\n')).toEqual(['4', '0 0', '']);
    expect([...(await filesOf(s.project)).keys()]).toEqual([]);
  });

  it("answers a form upload of generate_presigned_post as not served, in S3's XML", async () => {
    const s = await setup();
    const script = `
import sys, json, boto3
from botocore.config import Config
endpoint, key, secret, bucket = sys.argv[1:5]
s3 = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                  region_name='us-east-1', config=Config(signature_version='s3v4', s3={'addressing_style': 'path'}))
print(json.dumps(s3.generate_presigned_post(bucket, 'form/posted.txt', ExpiresIn=300)))
`;
    const { stdout } = await run(clients.python!, [
      '-c',
      script,
      s.endpoint,
      s.accessKeyId,
      s.secret,
      s.bucket,
    ]);
    const post: { url: string; fields: Record<string, string> } = JSON.parse(stdout);
    // As a browser sends the form: its fields, then the file.
    const form = new FormData();
    for (const [name, value] of Object.entries(post.fields)) form.append(name, value);
    form.append('file', new Blob(['posted']), 'posted.txt');
    const answer = await fetch(post.url, { method: 'POST', body: form });
    expect(answer.status).toBe(501);
    expect(answer.headers.get('content-type')).toMatch(/^application\/xml/);
    expect(await answer.text()).toContain('<Code>NotImplemented</Code>');
    expect([...(await filesOf(s.project)).keys()]).toEqual([]);
  });
});
