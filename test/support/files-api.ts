import { afterAll, beforeAll } from 'vitest';
import { startCoffer, type TestCoffer } from './coffer.ts';

/** The Coffer the test files of test/api/files-*.test.ts share. */

// Set by serveFiles's beforeAll for the test file that calls it.
export let coffer: TestCoffer;

/** Starts a Coffer for the calling test file. */
export function serveFiles(): void {
  beforeAll(async () => {
    coffer = await startCoffer();
  });
  afterAll(() => coffer.close());
}

/** The events recorded for a file, oldest first. */
export const eventsOf = (fileId: string) =>
  coffer.services.db.query<{ type: string; payload: any }>(
    'SELECT type, payload FROM events WHERE file_id = $1 ORDER BY id',
    [fileId],
  );
