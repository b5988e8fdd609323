import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Authenticated encryption of small secrets with AES-256-GCM. An envelope is base64url of
 *   version (1 byte) | nonce (12 bytes, random) | ciphertext | tag (16 bytes)
 * so that the scheme can change later while older envelopes stay readable. `context` is bound as
 * additional data: an envelope made for one purpose (or one row) does not open for another.
 */

const VERSION = 1;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
export const KEY_BYTES = 32;

function checkKey(key: Buffer): void {
  if (key.length !== KEY_BYTES) throw new RangeError(`an AES-256 key is ${KEY_BYTES} bytes`);
}

/** The envelope of `plaintext` under `key`, bound to `context`. */
export function seal(key: Buffer, plaintext: string | Buffer, context: string): string {
  checkKey(key);
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.of(VERSION), nonce, body, cipher.getAuthTag()]).toString('base64url');
}

/**
 * The plaintext of an envelope made by `seal` with the same key and context; undefined when it is
 * malformed, of an unknown version, or was altered (or made under another key or context).
 */
export function unseal(key: Buffer, envelope: string, context: string): Buffer | undefined {
  checkKey(key);
  if (!/^[A-Za-z0-9_-]+$/.test(envelope)) return undefined;
  const bytes = Buffer.from(envelope, 'base64url');
  if (bytes.length < 1 + NONCE_BYTES + TAG_BYTES || bytes[0] !== VERSION) return undefined;
  const nonce = bytes.subarray(1, 1 + NONCE_BYTES);
  const tag = bytes.subarray(bytes.length - TAG_BYTES);
  const body = bytes.subarray(1 + NONCE_BYTES, bytes.length - TAG_BYTES);
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(body), decipher.final()]);
  } catch {
    return undefined;
  }
}

/**
 * A key of its own for one purpose, derived from the server key (HKDF-SHA256): one server key then
 * serves encryption at rest, session tokens and derived secrets without any two sharing a key.
 */
export function subkey(serverKey: Buffer, purpose: string): Buffer {
  checkKey(serverKey);
  return Buffer.from(hkdfSync('sha256', serverKey, Buffer.alloc(0), `coffer:${purpose}`, KEY_BYTES));
}

/** How a key is written (COFFER_SECRET_KEY, secret.key), for messages. */
export const KEY_FORMAT = '32 bytes in base64 (openssl rand -base64 32)';

/** A key written as base64 or base64url (padding optional); undefined unless it is exactly 32 bytes. */
export function parseKey(text: string): Buffer | undefined {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) return undefined;
  const key = Buffer.from(trimmed.replace(/=$/, '').replace(/\+/g, '-').replace(/\//g, '_'), 'base64url');
  return key.length === KEY_BYTES ? key : undefined;
}

/** HMAC-SHA256 of `data` under `key`. */
export function hmac(key: Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}
