import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '../../domain/principal.ts';
import type { RawAnswer } from '../../http/error-handler.ts';
import { isUnder } from '../../http/mount.ts';
import type { RateLimits } from '../../http/rate-limit.ts';
import { ipInCidrs } from '../../lib/ip.ts';
import type { ResolvedS3Credential } from '../../modules/s3-credentials/service.ts';
import type { Services } from '../../services.ts';
import type { Target } from './call.ts';
import {
  accessDenied,
  asS3Error,
  invalidBucketName,
  invalidUri,
  noSuchBucket,
  notImplemented,
  S3Error,
} from './errors.ts';
import { isS3BucketName } from './keys.ts';
import { operationName, s3Operations } from './operations.ts';
import { authenticate, SigV4Error } from './sigv4.ts';
import { s3Xml } from './xml.ts';

/** Query parameters that name an S3 subresource, i.e. another operation than the plain one. */
const SUBRESOURCES = new Set([
  'acl',
  'analytics',
  'accelerate',
  'cors',
  'delete',
  'encryption',
  'intelligent-tiering',
  'inventory',
  'legal-hold',
  'lifecycle',
  'location',
  'logging',
  'metrics',
  'notification',
  'object-lock',
  'ownershipControls',
  'partNumber',
  'policy',
  'policyStatus',
  'publicAccessBlock',
  'replication',
  'requestPayment',
  'restore',
  'retention',
  'select',
  'tagging',
  'torrent',
  'uploadId',
  'uploads',
  'versioning',
  'versions',
  'website',
  'attributes',
]);

/** Another reading of a signature that did not match, whose own refusal does not hide the first. */
function retrySigned<T>(error: unknown, again: () => Promise<T>): Promise<T> {
  if (!(error instanceof SigV4Error && error.code === 'SignatureDoesNotMatch')) return Promise.reject(error);
  return again().catch(() => Promise.reject(error));
}

/** Refusals of a credential that did not prove itself: each counts toward the address's failed-authentication limit. */
const UNPROVEN = new Set(['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'InvalidToken']);

/** Where the endpoint is mounted on the API port. */
export const MOUNT = '/s3';

/** Whether a request URL is the endpoint's. */
export const isS3Url = (url: string) => isUnder(MOUNT, url);

/** `x-amz-id-2`, S3's extended request id (an error document's HostId): an opaque token of the request id. */
const hostIdOf = (requestId: string) => createHash('sha256').update(requestId).digest('base64');

const nameRequest = (request: FastifyRequest, reply: FastifyReply) =>
  reply.headers({ 'x-amz-request-id': request.id, 'x-amz-id-2': hostIdOf(request.id) });

/**
 * S3's ids of a request, on every answer under the mount as AWS sends them: `x-amz-request-id` and
 * `x-amz-id-2`. Set by the whole app's first onRequest hook: a refusal by any later hook, a CORS
 * preflight and an answer that bypasses the reply (sendSlices) carry them too.
 */
export function s3RequestIds(request: FastifyRequest, reply: FastifyReply): void {
  if (isS3Url(request.url)) nameRequest(request, reply);
}

function targetOf(path: string): Target {
  const rest = path.slice(MOUNT.length).replace(/^\//, '');
  if (rest === '') return {};
  const slash = rest.indexOf('/');
  const decode = (text: string) => {
    try {
      return decodeURIComponent(text);
    } catch {
      throw invalidUri();
    }
  };
  if (slash < 0) return { bucket: decode(rest) };
  const key = rest.slice(slash + 1);
  return { bucket: decode(rest.slice(0, slash)), key: key === '' ? undefined : decode(key) };
}

/** The name of the operation a request asks for: the subresource it names, or the plain one. */
function operationOf(method: string, target: Target, query: URLSearchParams): string {
  // GetObject and HeadObject take a part number as the part to read, not as another operation.
  const reads = method === 'GET' || method === 'HEAD';
  const named = [...query.keys()].filter(
    (name) => SUBRESOURCES.has(name) && !(reads && name === 'partNumber'),
  );
  // An UploadPart names the upload too: the part is its operation, whatever the order of the query.
  const subresource = named.includes('partNumber') ? 'partNumber' : named[0];
  const where = target.key !== undefined ? 'object' : target.bucket !== undefined ? 'bucket' : 'service';
  return `${method} ${where}${subresource ? `?${subresource}` : ''}`;
}

/** What an error names as its Resource: the bucket and key as the path has them, without the mount. */
const resourceOf = (request: FastifyRequest) => request.url.split('?')[0]!.slice(MOUNT.length) || '/';

/** What a refusal of a thing that is not there names, by its code, as S3 names it. */
const NAMED: Record<string, (target: Target, query: URLSearchParams) => Record<string, string | undefined>> =
  {
    NoSuchBucket: (target) => ({ BucketName: target.bucket }),
    NoSuchKey: (target) => ({ Key: target.key }),
    NoSuchVersion: (target, query) => ({ Key: target.key, VersionId: query.get('versionId') ?? undefined }),
    NoSuchUpload: (_target, query) => ({ UploadId: query.get('uploadId') ?? undefined }),
  };

/**
 * `error`, naming what it refuses as S3 does; what it was raised without (a refusal from deeper down,
 * which knows no key) is the request's: its bucket, key, `versionId` or `uploadId`.
 */
function namedAfterRequest(request: FastifyRequest, error: S3Error): S3Error {
  const named = NAMED[error.code];
  if (!named) return error;
  const [path, rawQuery = ''] = request.url.split('?') as [string, string?];
  let target: Target;
  try {
    target = targetOf(path);
  } catch {
    return error;
  }
  const names = named(target, new URLSearchParams(rawQuery));
  const details: Record<string, string> = {};
  for (const [name, value] of Object.entries(names)) {
    const given = error.details[name] ?? value;
    if (given !== undefined) details[name] = given;
  }
  if (Object.keys(details).every((name) => name in error.details)) return error;
  return new S3Error(error.status, error.code, error.message, {
    details: { ...details, ...error.details },
    headers: error.headers,
  });
}

/**
 * An S3 error answer: the error document (none for HEAD), its status and headers (the ids: s3RequestIds).
 * The elements of the error's own (`BucketName`, `Key`, `Condition`…) follow its message, as in S3.
 * The checksums of an object whose read failed once its headers were set go: the error document is
 * not its bytes, and an SDK would check the document against them rather than read the error.
 */
function sendS3Error(request: FastifyRequest, reply: FastifyReply, error: S3Error, resource: string) {
  for (const name of Object.keys(reply.getHeaders())) {
    if (name.startsWith('x-amz-checksum-')) reply.removeHeader(name);
  }
  reply.code(error.status);
  if (error.headers) reply.headers(error.headers);
  if (request.method === 'HEAD' || error.status === 304) return reply.send();
  return reply.type('application/xml').send(
    s3Xml(
      'Error',
      {
        Code: error.code,
        Message: error.message,
        ...error.details,
        Resource: resource,
        RequestId: request.id,
        HostId: hostIdOf(request.id),
      },
      false,
    ),
  );
}

/**
 * S3's answer to a request whose body stopped arriving (400 RequestTimeout, which the SDKs retry),
 * written on the raw socket: its handler is still waiting for the body.
 */
export const s3RequestTimeout = (request: FastifyRequest): RawAnswer => ({
  status: 400,
  type: 'application/xml',
  headers: { 'x-request-id': request.id, 'x-amz-request-id': request.id, 'x-amz-id-2': hostIdOf(request.id) },
  body: s3Xml(
    'Error',
    {
      Code: 'RequestTimeout',
      Message:
        'Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed.',
      RequestId: request.id,
      HostId: hostIdOf(request.id),
    },
    false,
  ),
});

/**
 * A URL under the mount that the router refused before any hook ran (Fastify's frameworkErrors): its
 * path cannot be percent-decoded, S3's 400 InvalidURI. The endpoint's routes are wildcards, with no
 * parameter to be too long.
 */
export function refuseS3Url(request: FastifyRequest, reply: FastifyReply) {
  nameRequest(request, reply);
  return sendS3Error(request, reply, invalidUri(), resourceOf(request));
}

/**
 * The S3-compatible endpoint, path-style at /s3: authenticated with SigV4, every operation onto
 * Coffer's services and its upload core, errors in S3's XML. Operations it does not serve answer
 * 501 NotImplemented.
 */
export function s3Routes(deps: {
  services: Services;
  region: string;
  /** The rate limits: the caller's own once authenticated, and the failed-authentication budget. */
  limits: Pick<RateLimits, 'chargeCaller' | 'refuseGuesser' | 'countAuthFailure'>;
}) {
  const { services, region } = deps;
  const operations = s3Operations(services, region);

  /**
   * Checks the signature, then that the credential may use this bucket (or, `creating` it, create
   * it); answers the caller, and the file at `fileKey` when it came with the credential (see
   * resolveS3Credential).
   */
  async function authorize(
    request: FastifyRequest,
    target: Target,
    reply: FastifyReply,
    { fileKey, creating = false }: { fileKey?: string; creating?: boolean } = {},
  ) {
    const [path, query = ''] = request.url.split('?') as [string, string?];
    let resolved: ResolvedS3Credential | undefined;
    const lookup = async (accessKeyId: string, sessionToken: string | undefined) => {
      const found = await services.s3Credentials.resolveS3Credential(accessKeyId, sessionToken, fileKey);
      // As S3 answers an expired session: clients (Uppy, the SDKs) then fetch new credentials.
      if (found === 'expired') throw new SigV4Error('ExpiredToken');
      resolved = found;
      return found && { secretAccessKey: found.secretAccessKey };
    };
    const signed = (signedPath: string, headers = request.headers) =>
      authenticate({ method: request.method, path: signedPath, query, headers }, lookup, { region });
    // Clients that take an endpoint for a host sign the path below the /s3 mount, and s3cmd signs the
    // mount as part of the Host header it sends without it. The rest of the request is signed alike
    // and the mount is the same for every request, so those readings are accepted too.
    const below = path.slice(MOUNT.length);
    // An address that failed too often is refused before its signature is looked at, as on the REST API.
    const guesser = deps.limits.refuseGuesser(request);
    if (guesser) throw guesser;
    const auth = await signed(path)
      .catch((error: unknown) => retrySigned(error, () => signed(below)))
      .catch((error: unknown) =>
        retrySigned(error, () =>
          signed(below, { ...request.headers, host: `${request.headers.host}${MOUNT}` }),
        ),
      )
      .catch(async (error: unknown) => {
        if (error instanceof SigV4Error && UNPROVEN.has(error.code))
          await deps.limits.countAuthFailure(request);
        throw error;
      });
    const { principal, project, atKey } = resolved!;
    request.principal = principal;
    request.project = project;
    const allowlist = project.settings.ip_allowlist;
    if (principal.kind !== 'admin' && allowlist !== null && !ipInCidrs(request.ip, allowlist)) {
      throw accessDenied('The caller IP address is not in the project allowlist');
    }
    await deps.limits.chargeCaller(request, reply);
    // Another project's bucket is as unknown as a missing one: ids of other tenants are never confirmed.
    // The caller's own is served whatever its name (a project's may take a prefix S3 reserves).
    if (target.bucket !== undefined && target.bucket !== project.bucket) {
      if (!isS3BucketName(target.bucket)) throw invalidBucketName(target.bucket);
      // Buckets are projects, made through the REST API: no credential may create one, as S3 refuses
      // a caller without that permission, whether a project has the name or not.
      if (creating) throw accessDenied('Buckets are Coffer projects: they are not created through S3');
      throw noSuchBucket(target.bucket);
    }
    return { auth, caller: { principal, project } satisfies Caller, atKey };
  }

  return async function plugin(app: FastifyInstance): Promise<void> {
    // Bodies stay streams: a PUT's bytes go to the store as they arrive, whatever their type.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    app.setErrorHandler((error, request, reply) =>
      sendS3Error(request, reply, namedAfterRequest(request, asS3Error(request, error)), resourceOf(request)),
    );

    // Each request counted by its S3 operation's name.
    const named = new WeakMap<FastifyRequest, string>();
    const requests = services.metrics?.s3Requests;
    if (requests) {
      app.addHook('onResponse', async (request, reply) => {
        requests.inc({
          operation: named.get(request) ?? 'unsupported',
          status_code: String(reply.statusCode),
        });
      });
    }
    const handle = async (request: FastifyRequest, reply: FastifyReply) => {
      if (request.method === 'PATCH') {
        throw new S3Error(
          405,
          'MethodNotAllowed',
          'The specified method is not allowed against this resource.',
          { headers: { allow: 'GET, HEAD, PUT, POST, DELETE' } },
        );
      }
      const [path, rawQuery = ''] = request.url.split('?') as [string, string?];
      const target = targetOf(path);
      const query = new URLSearchParams(rawQuery);
      const operation = operationOf(request.method, target, query);
      named.set(request, operationName(operation, request, query));
      // A browser-based upload (POST Object, as boto3's generate_presigned_post makes it) is signed in its
      // form fields, not in the request: refused as not served, whatever the form holds, rather than
      // as a request that carries no signature.
      if (operation === 'POST bucket')
        throw notImplemented('POST Object (a browser-based upload with a POST policy)');
      const handler = operations[operation];
      // A read of an object looks its file up with the credential: one round trip where neither is cached.
      const reads = operation === 'GET object' || operation === 'HEAD object';
      const { auth, caller, atKey } = await authorize(request, target, reply, {
        fileKey: reads ? target.key : undefined,
        creating: operation === 'PUT bucket',
      });
      if (!handler) throw notImplemented(`The operation ${operation}`);
      return handler({ request, reply, caller, auth, target: target as Required<Target>, query, atKey });
    };
    // Counted per client address with the object URLs' budget before the signature is known, then per
    // credential once it is (deps.limits).
    const config = { access: 'public' as const, limitGroup: 'objects' as const };
    for (const url of [MOUNT, `${MOUNT}/*`]) {
      // Not in the OpenAPI document: S3 is its own protocol, documented by AWS (and in the README).
      app.route({
        // PATCH, which S3 has no use for, is answered 405 MethodNotAllowed in S3's words.
        method: ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH'],
        url,
        config,
        schema: { hide: true },
        handler: handle,
      });
    }
  };
}
