import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseKey, seal, subkey, unseal } from '../../src/lib/encryption.ts';

const key = randomBytes(32);

/** The envelope with one byte of its decoded form changed at `index` (negative: from the end). */
function flipped(envelope: string, index: number): string {
  const bytes = Buffer.from(envelope, 'base64url');
  const at = index < 0 ? bytes.length + index : index;
  bytes[at] = bytes[at]! ^ 0x01;
  return bytes.toString('base64url');
}

describe('sealed envelopes (AES-256-GCM)', () => {
  it('open with the key and context they were made with', () => {
    const envelope = seal(key, 'the secret', 'context-a');
    expect(envelope).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(envelope).not.toContain('the secret');
    expect(unseal(key, envelope, 'context-a')?.toString()).toBe('the secret');
  });

  it('use a fresh nonce every time: the same plaintext never seals the same', () => {
    const envelopes = new Set(Array.from({ length: 50 }, () => seal(key, 'same', 'c')));
    expect(envelopes.size).toBe(50);
    // version (1) + nonce (12) + 4 bytes + tag (16)
    expect(Buffer.from([...envelopes][0]!, 'base64url')).toHaveLength(1 + 12 + 4 + 16);
  });

  it('refuse any tampering: version, nonce, ciphertext or tag altered, truncated or extended', () => {
    const envelope = seal(key, 'a secret of some length', 'c');
    const decoded = Buffer.from(envelope, 'base64url');
    for (let index = 0; index < decoded.length; index++) {
      expect(unseal(key, flipped(envelope, index), 'c'), `byte ${index}`).toBeUndefined();
    }
    expect(unseal(key, decoded.subarray(0, -1).toString('base64url'), 'c')).toBeUndefined();
    expect(unseal(key, Buffer.concat([decoded, Buffer.of(0)]).toString('base64url'), 'c')).toBeUndefined();
    expect(unseal(key, decoded.subarray(0, 20).toString('base64url'), 'c')).toBeUndefined();
    expect(unseal(key, '', 'c')).toBeUndefined();
    expect(unseal(key, 'not base64url!', 'c')).toBeUndefined();
  });

  it('refuse another key or another context', () => {
    const envelope = seal(key, 'x', 'for-one-thing');
    expect(unseal(randomBytes(32), envelope, 'for-one-thing')).toBeUndefined();
    expect(unseal(key, envelope, 'for-another')).toBeUndefined();
  });

  it('take 32-byte keys only', () => {
    expect(() => seal(randomBytes(16), 'x', 'c')).toThrow(RangeError);
  });
});

describe('keys', () => {
  it('are read from base64 or base64url, 32 bytes exactly', () => {
    const bytes = randomBytes(32);
    expect(parseKey(bytes.toString('base64'))).toEqual(bytes);
    expect(parseKey(`${bytes.toString('base64url')}\n`)).toEqual(bytes);
    expect(parseKey(randomBytes(16).toString('base64'))).toBeUndefined();
    expect(parseKey(randomBytes(33).toString('base64'))).toBeUndefined();
    expect(parseKey('not a key at all, not a key at all, not a ke')).toBeUndefined();
  });

  it('derive a subkey per purpose: distinct, and the same for the same server key', () => {
    const a = subkey(key, 'one');
    expect(a).toHaveLength(32);
    expect(subkey(key, 'one')).toEqual(a);
    expect(subkey(key, 'two')).not.toEqual(a);
    expect(subkey(randomBytes(32), 'one')).not.toEqual(a);
  });
});
