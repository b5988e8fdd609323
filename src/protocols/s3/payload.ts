/** What a request's body must be checked against: x-amz-content-sha256 and the headers that go with it. */
import { headerValue, queryParam } from './canonical.ts';
import { algorithmOfHeader, CHECKSUM_ALGORITHMS, type ChecksumAlgorithm } from './checksums.ts';
import { SigV4Error } from './errors.ts';
import type { Authenticated, Payload, S3Request } from './types.ts';

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;

/** The last line of the canonical request: the client's `x-amz-content-sha256`, as sent. */
export function payloadHashOf(
  request: S3Request,
  query: Record<string, string | string[]>,
  presigned: boolean,
): string {
  const header = headerValue(request.headers, 'x-amz-content-sha256');
  if (!presigned) {
    if (header === undefined)
      throw new SigV4Error(
        'InvalidRequest',
        'Missing required header for this request: x-amz-content-sha256',
      );
    return header;
  }
  const param = queryParam(query, 'X-Amz-Content-Sha256');
  if (Array.isArray(param))
    throw new SigV4Error(
      'AuthorizationQueryParametersError',
      'The X-Amz-Content-Sha256 parameter is repeated.',
    );
  return header ?? param ?? 'UNSIGNED-PAYLOAD';
}

export type PayloadClass =
  | Exclude<Payload, { kind: 'chunked-signed' }>
  | {
      kind: 'chunked-signed';
      decodedLength: number;
      trailer: ChecksumAlgorithm | undefined;
      signedTrailer: boolean;
    };

export function classifyPayload(value: string, request: S3Request): PayloadClass {
  const hash = value.trim();
  if (HEX_SHA256.test(hash)) return { kind: 'sha256', hash: hash.toLowerCase() };
  switch (hash) {
    case 'UNSIGNED-PAYLOAD':
      return { kind: 'unsigned' };
    case 'STREAMING-UNSIGNED-PAYLOAD-TRAILER':
      return {
        kind: 'chunked-unsigned-trailer',
        decodedLength: decodedLength(request),
        trailer: trailer(request),
      };
    case 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD':
    case 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER': {
      const signedTrailer = hash.endsWith('-TRAILER');
      const declared = trailer(request);
      if (declared !== undefined && !signedTrailer)
        throw new SigV4Error(
          'InvalidRequest',
          'x-amz-trailer needs x-amz-content-sha256 of a -TRAILER kind.',
        );
      return {
        kind: 'chunked-signed',
        decodedLength: decodedLength(request),
        trailer: declared,
        signedTrailer,
      };
    }
  }
  if (hash.startsWith('STREAMING-AWS4-ECDSA-P256-SHA256'))
    throw new SigV4Error('InvalidRequest', 'Signature Version 4A (AWS4-ECDSA-P256-SHA256) is not supported.');
  throw new SigV4Error(
    'InvalidArgument',
    'x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.',
  );
}

function decodedLength(request: S3Request): number {
  const value = headerValue(request.headers, 'x-amz-decoded-content-length');
  if (value === undefined)
    throw new SigV4Error(
      'MissingSecurityHeader',
      'Your request is missing a required header: x-amz-decoded-content-length.',
    );
  const length = Number(value.trim());
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(length))
    throw new SigV4Error('InvalidArgument', 'x-amz-decoded-content-length is not a valid length.');
  return length;
}

function trailer(request: S3Request): ChecksumAlgorithm | undefined {
  const value = headerValue(request.headers, 'x-amz-trailer');
  if (value === undefined || value.trim() === '') return undefined;
  const algorithm = algorithmOfHeader(value);
  if (algorithm === undefined)
    throw new SigV4Error(
      'InvalidRequest',
      'The value specified in the x-amz-trailer header is not supported',
    );
  return algorithm;
}

export function bodyDigestsOf(
  request: S3Request,
  query: Record<string, string | string[]>,
  presigned: boolean,
): Authenticated['bodyDigests'] {
  const checksums: Record<string, string> = {};
  for (const algorithm of CHECKSUM_ALGORITHMS) {
    const name = `x-amz-checksum-${algorithm}`;
    const fromQuery = presigned ? queryParam(query, name) : undefined;
    const value =
      headerValue(request.headers, name) ?? (Array.isArray(fromQuery) ? fromQuery.join(',') : fromQuery);
    if (value !== undefined) checksums[name] = value;
  }
  return { checksums, contentMd5: headerValue(request.headers, 'content-md5') };
}
