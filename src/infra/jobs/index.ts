export { completeJob, enqueueJob, JOBS, type Job, type JobKind } from './jobs-table.ts';
export { createPeriodicRunner, PERIODIC_TASKS, type PeriodicTask } from './periodic.ts';
export {
  type Claimed,
  claim,
  holdLease,
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
  type JobContext,
  type JobHandler,
  type JobHandlers,
  type JobRunner,
} from './runner.ts';
