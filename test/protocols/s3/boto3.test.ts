import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { opaqueBytes, sha256 } from '../../support/files.ts';
import { clients, run, type Setup, s3ClientsSuite } from '../../support/s3-clients.ts';

// boto3, as Debian ships it (see clients in test/support/s3-clients.ts), through /s3: transfers in
// parts, presigned URLs, versions, every result checked through Coffer's REST API.
const { setup, filesOf } = s3ClientsSuite();

const MiB = 1024 * 1024;

/**
 * What a boto3 script prints, run against the bucket of `s` with `args` (its `args`): it starts with
 * boto3 imported, `connection` (the keyword arguments of a client or resource signing with SigV4 on
 * Coffer's endpoint, path-style), a client `s3` made with it, and `bucket`.
 */
async function boto3(s: Setup, script: string, ...args: string[]): Promise<string> {
  const preamble = `
import sys, json, urllib.request, boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
endpoint, key, secret, bucket = sys.argv[1:5]
args = sys.argv[5:]
connection = dict(endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                  region_name='us-east-1', config=Config(signature_version='s3v4', s3={'addressing_style': 'path'}))
s3 = boto3.client('s3', **connection)
`;
  const { stdout } = await run(clients.python!, [
    '-c',
    preamble + script,
    s.endpoint,
    s.accessKeyId,
    s.secret,
    s.bucket,
    ...args,
  ]);
  return stdout;
}

describe.skipIf(!clients.python)('boto3', () => {
  it('uploads with upload_file (in parts past its threshold), lists, downloads and presigns', async () => {
    const s = await setup();
    const data = opaqueBytes(9 * MiB + 1, 'big');
    writeFileSync(join(s.dir, 'big.bin'), data);
    const script = `
path, out = args
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
    const stdout = await boto3(s, script, join(s.dir, 'big.bin'), out);
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
b = boto3.resource('s3', **connection).Bucket(bucket)
for body in (b'one', b'two', b'three'):
    b.put_object(Key='kept/a.txt', Body=body)
b.put_object(Key='b.txt', Body=b'only')
print(len(list(b.object_versions.all())))
b.object_versions.delete()
print(len(list(b.object_versions.all())), len(list(b.objects.all())))
`;
    const stdout = await boto3(s, script);
    expect(stdout.split('\n')).toEqual(['4', '0 0', '']);
    expect([...(await filesOf(s.project)).keys()]).toEqual([]);
  });

  it("answers a form upload of generate_presigned_post as not served, in S3's XML", async () => {
    const s = await setup();
    const script = `
print(json.dumps(s3.generate_presigned_post(bucket, 'form/posted.txt', ExpiresIn=300)))
`;
    const stdout = await boto3(s, script);
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
