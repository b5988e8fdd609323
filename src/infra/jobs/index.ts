export { completeJob, enqueueJob, JOBS, type Job, type JobKind } from './jobs-table.ts';
export { createPeriodicRunner, PERIODIC_TASKS, type PeriodicTask } from './periodic.ts';
export {
  type Claimed,
  claim,
  type Lease,
  LeaseLostError,
  type QueueDepth,
  type QueueTable,
  queueDepth,
  release,
} from './queue.ts';
export { exponentialBackoff, nextRetryDelay, RETRY_FOREVER, type RetryPolicy } from './retry.ts';
export {
  createJobRunner,
  type JobHandler,
} from './runner.ts';
