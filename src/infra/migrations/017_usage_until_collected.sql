-- Bytes count against the quota until the collector removed them: a failed or quarantined file holds
-- its object as a ready one does, and a deleted file of any state holds it until it is purged. (A
-- failed upload that never stored its bytes is purged as it fails, so it holds nothing.)
CREATE OR REPLACE FUNCTION usage_bucket(status text, deleted_at timestamptz, purged_at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN purged_at IS NOT NULL THEN NULL
    WHEN deleted_at IS NULL THEN status
    ELSE 'deleted'
  END
$$;

-- A failed multipart upload's parts were released when it ended: it holds nothing any more.
UPDATE files f SET purged_at = now()
FROM multipart_sessions s
WHERE s.file_id = f.id AND s.content_id IS NULL AND s.status IN ('aborted', 'expired')
  AND s.store_released_at IS NOT NULL AND f.status = 'failed' AND f.purged_at IS NULL;

-- The kept usage, counted again from the rows under the new rule.
DELETE FROM project_usage_deltas;
DELETE FROM project_usage;
INSERT INTO project_usage SELECT * FROM project_usage_actual;
