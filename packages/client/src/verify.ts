/** Webhook signature checks with Web Crypto: the same code in browsers, Node.js, Deno and workers. */

const HEX_SIGNATURE = /^[0-9a-f]{64}$/i;

const bytesOf = (body: string | ArrayBuffer | ArrayBufferView): Uint8Array<ArrayBuffer> =>
  typeof body === 'string'
    ? new TextEncoder().encode(body)
    : body instanceof ArrayBuffer
      ? new Uint8Array(body)
      : new Uint8Array(body.buffer as ArrayBuffer, body.byteOffset, body.byteLength);

/**
 * Whether `signatureHeader` (x-coffer-signature) is the hex HMAC-SHA256 of `rawBody` with `secret`.
 * Give the raw bytes as received (a Buffer, or the text before any JSON parsing). Web Crypto's
 * verify compares in constant time.
 */
export async function verifyWebhook(
  rawBody: string | ArrayBuffer | ArrayBufferView,
  signatureHeader: string | readonly string[] | null | undefined,
  secret: string,
): Promise<boolean> {
  const header = typeof signatureHeader === 'string' ? signatureHeader : signatureHeader?.[0];
  const signature = header?.trim();
  if (!signature || !HEX_SIGNATURE.test(signature) || !secret) return false;
  const mac = new Uint8Array(32);
  for (let index = 0; index < 32; index++)
    mac[index] = Number.parseInt(signature.slice(index * 2, index * 2 + 2), 16);
  const key = await crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(secret),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['verify'],
  );
  return crypto.subtle.verify('HMAC', key, mac, bytesOf(rawBody));
}
