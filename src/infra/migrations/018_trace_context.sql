-- The trace context (a W3C traceparent) of the request or job that queued the work, kept while
-- tracing is on: whichever process runs the job or the delivery continues that trace. NULL when
-- tracing is off. Every queue table has it, since the jobs module claims them all alike.
ALTER TABLE jobs ADD COLUMN traceparent text;
ALTER TABLE deliveries ADD COLUMN traceparent text;
ALTER TABLE periodic_tasks ADD COLUMN traceparent text;
