-- Every queue (jobs, webhook deliveries, periodic tasks) is leased the same way: a claim sets
-- lease_token and pushes the due time forward by a short lease, which the worker renews while the
-- work runs (heartbeat). A worker that dies stops renewing: the row is due again within one lease.
-- A result is written only while the row still holds the worker's token, so a worker that lost its
-- lease can never finish work that another worker took over.
ALTER TABLE jobs ADD COLUMN lease_token text;
-- Since when the job has been failing without a break: a scan is given up (fails closed) once the
-- scanner has been unavailable for the retry window, however many attempts that took.
ALTER TABLE jobs ADD COLUMN failing_since timestamptz(3);

ALTER TABLE deliveries ADD COLUMN lease_token text;
ALTER TABLE deliveries ADD COLUMN failing_since timestamptz(3);

-- Work that recurs (collection, reaping of expired multipart sessions): one row per task, run by one
-- worker of the whole deployment at a time, every interval.
CREATE TABLE periodic_tasks (
  id text COLLATE "C" PRIMARY KEY,
  run_at timestamptz NOT NULL DEFAULT now(),
  attempts integer NOT NULL DEFAULT 0,
  lease_token text,
  last_error text,
  failing_since timestamptz(3)
);
