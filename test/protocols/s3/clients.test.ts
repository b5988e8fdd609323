import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TestProject } from '../../support/coffer.ts';
import { opaqueBytes, sha256 } from '../../support/files.ts';
import { drain } from '../../support/pipeline.ts';
import { clients, run, type Setup, s3ClientsSuite } from '../../support/s3-clients.ts';

// The S3 command-line clients users already run, as Debian ships them (see clients in
// test/support/s3-clients.ts): each uploads, lists, syncs and deletes through /s3, large files in
// parts, and every result is checked through Coffer's REST API.
const { coffer, setup, filesOf } = s3ClientsSuite();

const MiB = 1024 * 1024;

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
