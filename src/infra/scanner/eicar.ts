import type { Readable } from 'node:stream';
import type { Scanner, ScanResult } from './scanner.ts';

// The official 68-byte EICAR test string, joined from two halves so that this source file is not
// an EICAR test file itself to a real antivirus engine.
const EICAR = Buffer.from(
  `${'X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR'}${'-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*'}`,
  'latin1',
);

/** The signature name the built-in scanner reports. */
export const EICAR_SIGNATURE = 'Eicar-Test-Signature';

/** A fresh copy of the standard EICAR test file (68 bytes, no newline), e.g. to test a scanner. */
export function eicarTestFile(): Buffer {
  return Buffer.from(EICAR);
}

/**
 * A scanner without an engine that knows a single signature: the EICAR test string, anywhere in the
 * stream (also across chunk boundaries). It streams: memory stays flat whatever the file's size, and
 * it stops reading (destroying the stream) as soon as it found the string. It is what runs when no
 * clamd is configured, so that the scanning pipeline can be exercised end to end, and it protects
 * from nothing else.
 */
export function createEicarScanner(): Scanner {
  return {
    name: 'eicar',
    async scan(stream: Readable): Promise<ScanResult> {
      const keep = EICAR.length - 1;
      // The last `keep` bytes seen, which may hold the start of a match that the next chunk completes.
      let tail = Buffer.alloc(0);
      for await (const chunk of stream) {
        const bytes = toBuffer(chunk);
        if (bytes.length === 0) continue;
        const seam = Buffer.concat([tail, bytes.subarray(0, keep)]);
        if (seam.includes(EICAR) || bytes.includes(EICAR)) {
          stream.destroy();
          return { clean: false, signature: EICAR_SIGNATURE };
        }
        tail =
          bytes.length >= keep
            ? Buffer.from(bytes.subarray(bytes.length - keep))
            : Buffer.from(seam.subarray(Math.max(0, seam.length - keep)));
      }
      return { clean: true };
    },
    async ping(): Promise<void> {},
  };
}

function toBuffer(chunk: unknown): Buffer {
  if (Buffer.isBuffer(chunk)) return chunk;
  if (typeof chunk === 'string') return Buffer.from(chunk, 'utf8');
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  throw new TypeError(`cannot scan a stream chunk of type ${typeof chunk}`);
}
