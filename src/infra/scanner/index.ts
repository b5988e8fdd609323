import { withSpans } from '../spans.ts';
import { createClamdScanner } from './clamd.ts';
import { createEicarScanner } from './eicar.ts';
import type { Scanner } from './scanner.ts';

export {
  type ClamdAddress,
  type ClamdOptions,
  createClamdScanner,
  parseClamdUrl,
  parseScanReply,
} from './clamd.ts';
export { createEicarScanner, EICAR_SIGNATURE, eicarTestFile } from './eicar.ts';
export { type Scanner, ScannerUnavailableError, ScanRejectedError, type ScanResult } from './scanner.ts';

/**
 * The scanner Coffer runs: clamd at `clamdUrl` (COFFER_CLAMD_URL) when set; else the built-in
 * scanner, which knows only the EICAR test signature, with one warning that files are not really
 * scanned.
 */
export function createScanner(clamdUrl: string | undefined, log: { warn(msg: string): void }): Scanner {
  if (clamdUrl)
    return withSpans(createClamdScanner(clamdUrl), 'scanner', ['scan'], { 'coffer.scanner': 'clamd' });
  log.warn(
    'No antivirus engine is configured (set COFFER_CLAMD_URL to a clamd): files are checked only for ' +
      'the EICAR test signature.',
  );
  return withSpans(createEicarScanner(), 'scanner', ['scan'], { 'coffer.scanner': 'eicar' });
}
