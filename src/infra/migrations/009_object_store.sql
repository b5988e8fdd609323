-- A checksum computed after the upload (stores that do not hash on the way in) is recorded by key.
CREATE INDEX files_storage_key ON files (storage_key);
CREATE INDEX file_versions_storage_key ON file_versions (storage_key);
CREATE INDEX pending_contents_storage_key ON pending_contents (storage_key);

-- The size each part number's URLs were signed for, at most (part number → bytes): what the parts
-- of a session can hold in the store is bounded by their sum.
ALTER TABLE multipart_sessions ADD COLUMN part_grants jsonb NOT NULL DEFAULT '{}';

-- The object a job is about, fixed when it was queued (a digest must read the bytes of that upload,
-- even when the file has other content by the time the job runs).
ALTER TABLE jobs ADD COLUMN storage_key text;

-- When the store discarded the parts of an aborted or expired session; until then the reaper retries.
ALTER TABLE multipart_sessions ADD COLUMN store_released_at timestamptz(3);
UPDATE multipart_sessions SET store_released_at = coalesce(finished_at, now()) WHERE status <> 'open';
