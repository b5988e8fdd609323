"""Drives the SigV4 capture server with boto3 (botocore's own signer), printing one JSON result per call."""
import io
import json
import sys
import urllib.error
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

endpoint, access_key, secret_key = sys.argv[1:4]


def client(secret=secret_key, **s3):
    config = Config(signature_version='s3v4', s3={'addressing_style': 'path', **s3}, retries={'max_attempts': 1})
    return boto3.client('s3', endpoint_url=endpoint, region_name='us-east-1', aws_access_key_id=access_key,
                        aws_secret_access_key=secret, config=config)


def run(name, call):
    try:
        call()
        print(json.dumps({'name': name, 'ok': True}))
    except ClientError as error:
        print(json.dumps({'name': name, 'ok': False, 'code': error.response['Error']['Code']}))
    except urllib.error.HTTPError as error:
        print(json.dumps({'name': name, 'ok': False, 'status': error.code}))


s3 = client()
run('put bytes', lambda: s3.put_object(Bucket='b', Key='a b/ü+~=x', Body=b'hello from boto3'))
run('put stream', lambda: s3.put_object(Bucket='b', Key='k', Body=io.BytesIO(b'x' * 100_000)))
run('put sha256', lambda: s3.put_object(Bucket='b', Key='k', Body=b'sum me', ChecksumAlgorithm='SHA256'))
run('put unsigned payload', lambda: client(payload_signing_enabled=False).put_object(Bucket='b', Key='k', Body=b'u'))
run('get odd key', lambda: s3.get_object(Bucket='b', Key="d i r/ünï+c~o=d&e?#%41'()*!"))
run('list odd prefix', lambda: s3.list_objects_v2(Bucket='b', Prefix='a b+c~/ü/', Delimiter='/', StartAfter='x=y&z'))
run('wrong secret', lambda: client(secret='wrong').get_object(Bucket='b', Key='k'))


def presigned(method, params, body=None):
    url = s3.generate_presigned_url(method, Params=params, ExpiresIn=300)
    request = urllib.request.Request(url, data=body, method='PUT' if body is not None else 'GET')
    urllib.request.urlopen(request).read()


run('presigned get', lambda: presigned('get_object', {'Bucket': 'b', 'Key': 'a b/ü+~'}))
run('presigned put', lambda: presigned('put_object', {'Bucket': 'b', 'Key': 'p u t'}, b'presigned body'))
