import type { Readable } from 'node:stream';

/** The verdict on one file. `signature` names what the engine found, e.g. `Eicar-Test-Signature`. */
export type ScanResult = { clean: true } | { clean: false; signature: string };

/**
 * An antivirus engine. `scan` consumes the stream: it reads it to the end, or destroys it when the
 * scan ends early (an early verdict, a refusal or a failure), so the caller never has to.
 *
 * Failures: {@link ScannerUnavailableError} when the engine could not give a verdict right now
 * (retry later with backoff), {@link ScanRejectedError} when it will never scan this file whole
 * (mark the file failed, never clean). An error of the input stream itself is passed through as is.
 */
export interface Scanner {
  readonly name: string;
  scan(stream: Readable): Promise<ScanResult>;
  /** Resolves when the engine answers within `timeoutMs`, else rejects with ScannerUnavailableError. */
  ping(timeoutMs: number): Promise<void>;
}

/** The engine is down, unreachable, reset the connection, timed out or failed: retry with backoff. */
export class ScannerUnavailableError extends Error {
  override name = 'ScannerUnavailableError';
}

/**
 * The engine cannot scan this file whole, e.g. clamd's "INSTREAM size limit exceeded": retrying
 * does not help, and the file must be marked failed, never clean.
 */
export class ScanRejectedError extends Error {
  override name = 'ScanRejectedError';
}
