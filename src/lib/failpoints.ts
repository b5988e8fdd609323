/**
 * Named steps where this process can be made to crash on purpose, to prove that Coffer recovers from
 * a crash at exactly that step (the fault-injection tests start real servers with
 * COFFER_FAILPOINTS=name,…). A hit is SIGKILL to itself: nothing runs on the way out, as in a power
 * cut. Unset, as in production, a step costs one check of an empty set.
 */
export const FAILPOINTS = [
  /** The single upload's object is sealed in the store; the file's transaction has not run. */
  'upload.confirm.sealed',
  /** The file's confirm is committed; the answer has not been sent. */
  'upload.confirm.committed',
  /** The store assembled the multipart object; the file's transaction has not run. */
  'multipart.complete.assembled',
  /** A new version's object is sealed; the version's transaction has not run. */
  'version.confirm.sealed',
  /** The scanner gave its verdict; the verdict's transaction has not run. */
  'scan.judged',
  /** The receiver accepted a delivery; the delivery is not marked delivered. */
  'webhook.delivery.sent',
] as const;
export type Failpoint = (typeof FAILPOINTS)[number];

const armed = new Set(
  (process.env.COFFER_FAILPOINTS ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean),
);
for (const name of armed) {
  if (!(FAILPOINTS as readonly string[]).includes(name))
    throw new Error(`COFFER_FAILPOINTS: unknown failpoint ${JSON.stringify(name)}`);
}

export function failpoint(name: Failpoint): void {
  if (armed.size > 0 && armed.has(name)) process.kill(process.pid, 'SIGKILL');
}
