-- What each project holds, kept by the triggers below in the transaction of every change to the rows
-- it sums, so that it never lags them and no code path can forget it. A change appends its
-- differences to project_usage_deltas (an insert: uploads never wait on each other for it); what a
-- project holds is its project_usage row plus its deltas (view project_usage_kept), and deltas are
-- folded into the row from time to time. Uploads to a project with quotas are admitted one at a time
-- (an advisory lock) against those sums, read right after their own row is written.
--
-- A file is in one bucket: its status while it is not deleted; `deleted` once deleted, until the
-- collector purges it (failed and quarantined files count for nothing, deleted or not).
-- versions_bytes: objects of earlier versions (each object once, not the current content) of files
-- not purged, and new content being checked; versions_reserved_bytes: new content being uploaded.
CREATE TABLE project_usage (
  project_id text COLLATE "C" PRIMARY KEY REFERENCES projects (id),
  uploading_files bigint NOT NULL DEFAULT 0,
  uploading_bytes bigint NOT NULL DEFAULT 0,
  processing_files bigint NOT NULL DEFAULT 0,
  processing_bytes bigint NOT NULL DEFAULT 0,
  ready_files bigint NOT NULL DEFAULT 0,
  ready_bytes bigint NOT NULL DEFAULT 0,
  failed_files bigint NOT NULL DEFAULT 0,
  failed_bytes bigint NOT NULL DEFAULT 0,
  quarantined_files bigint NOT NULL DEFAULT 0,
  quarantined_bytes bigint NOT NULL DEFAULT 0,
  deleted_files bigint NOT NULL DEFAULT 0,
  deleted_bytes bigint NOT NULL DEFAULT 0,
  versions_bytes bigint NOT NULL DEFAULT 0,
  versions_reserved_bytes bigint NOT NULL DEFAULT 0
);

CREATE TABLE project_usage_deltas (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id text COLLATE "C" NOT NULL,
  uploading_files bigint NOT NULL DEFAULT 0,
  uploading_bytes bigint NOT NULL DEFAULT 0,
  processing_files bigint NOT NULL DEFAULT 0,
  processing_bytes bigint NOT NULL DEFAULT 0,
  ready_files bigint NOT NULL DEFAULT 0,
  ready_bytes bigint NOT NULL DEFAULT 0,
  failed_files bigint NOT NULL DEFAULT 0,
  failed_bytes bigint NOT NULL DEFAULT 0,
  quarantined_files bigint NOT NULL DEFAULT 0,
  quarantined_bytes bigint NOT NULL DEFAULT 0,
  deleted_files bigint NOT NULL DEFAULT 0,
  deleted_bytes bigint NOT NULL DEFAULT 0,
  versions_bytes bigint NOT NULL DEFAULT 0,
  versions_reserved_bytes bigint NOT NULL DEFAULT 0
);
CREATE INDEX project_usage_deltas_project ON project_usage_deltas (project_id);

CREATE FUNCTION usage_bucket(status text, deleted_at timestamptz, purged_at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN purged_at IS NOT NULL THEN NULL
    WHEN deleted_at IS NULL THEN status
    WHEN status IN ('uploading', 'processing', 'ready') THEN 'deleted'
  END
$$;

-- The objects of a file's versions other than `current_key` (its current content), each once.
CREATE FUNCTION usage_earlier_versions_bytes(file text, current_key text) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT coalesce(sum(size_bytes), 0)::bigint FROM (
    SELECT DISTINCT ON (storage_key) size_bytes FROM file_versions
    WHERE file_id = file AND storage_key <> current_key
  ) AS held
$$;

-- `value` when `bucket` is `wanted`, else 0: one file's share of one counter.
CREATE FUNCTION usage_part(bucket text, wanted text, value bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN bucket = wanted THEN value ELSE 0 END
$$;

-- Every project has its row from the start, which the folds of its deltas add to.
CREATE FUNCTION usage_track_project() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO project_usage (project_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;

CREATE TRIGGER projects_usage AFTER INSERT ON projects
  FOR EACH ROW EXECUTE FUNCTION usage_track_project();

-- A file leaves its old bucket and enters its new one; its earlier versions are recounted only when
-- they can change (its current content changed, or it was purged). One UPDATE: this runs on every
-- upload's initiate and confirm.
CREATE FUNCTION usage_track_file() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  old_bucket text;
  new_bucket text;
  old_size bigint := 0;
  new_size bigint := 0;
  versions bigint := 0;
  project text;
BEGIN
  IF TG_OP <> 'INSERT' THEN
    old_bucket := usage_bucket(OLD.status, OLD.deleted_at, OLD.purged_at);
    old_size := OLD.size_bytes;
    project := OLD.project_id;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    new_bucket := usage_bucket(NEW.status, NEW.deleted_at, NEW.purged_at);
    new_size := NEW.size_bytes;
    project := NEW.project_id;
  END IF;
  IF TG_OP = 'DELETE' THEN
    IF OLD.purged_at IS NULL THEN versions := -usage_earlier_versions_bytes(OLD.id, OLD.storage_key); END IF;
  ELSIF TG_OP = 'UPDATE' AND (OLD.storage_key <> NEW.storage_key OR (OLD.purged_at IS NULL) <> (NEW.purged_at IS NULL)) THEN
    IF NEW.purged_at IS NULL THEN versions := usage_earlier_versions_bytes(NEW.id, NEW.storage_key); END IF;
    IF OLD.purged_at IS NULL THEN versions := versions - usage_earlier_versions_bytes(OLD.id, OLD.storage_key); END IF;
  END IF;
  INSERT INTO project_usage_deltas (project_id, uploading_files, uploading_bytes, processing_files, processing_bytes, ready_files, ready_bytes, failed_files, failed_bytes, quarantined_files, quarantined_bytes, deleted_files, deleted_bytes, versions_bytes)
  VALUES (project,
    usage_part(new_bucket, 'uploading', 1) - usage_part(old_bucket, 'uploading', 1),
    usage_part(new_bucket, 'uploading', new_size) - usage_part(old_bucket, 'uploading', old_size),
    usage_part(new_bucket, 'processing', 1) - usage_part(old_bucket, 'processing', 1),
    usage_part(new_bucket, 'processing', new_size) - usage_part(old_bucket, 'processing', old_size),
    usage_part(new_bucket, 'ready', 1) - usage_part(old_bucket, 'ready', 1),
    usage_part(new_bucket, 'ready', new_size) - usage_part(old_bucket, 'ready', old_size),
    usage_part(new_bucket, 'failed', 1) - usage_part(old_bucket, 'failed', 1),
    usage_part(new_bucket, 'failed', new_size) - usage_part(old_bucket, 'failed', old_size),
    usage_part(new_bucket, 'quarantined', 1) - usage_part(old_bucket, 'quarantined', 1),
    usage_part(new_bucket, 'quarantined', new_size) - usage_part(old_bucket, 'quarantined', old_size),
    usage_part(new_bucket, 'deleted', 1) - usage_part(old_bucket, 'deleted', 1),
    usage_part(new_bucket, 'deleted', new_size) - usage_part(old_bucket, 'deleted', old_size),
    versions);
  RETURN NULL;
END $$;

CREATE TRIGGER files_usage AFTER INSERT OR DELETE ON files
  FOR EACH ROW EXECUTE FUNCTION usage_track_file();
CREATE TRIGGER files_usage_change AFTER UPDATE OF status, size_bytes, storage_key, deleted_at, purged_at ON files
  FOR EACH ROW WHEN (
    OLD.status IS DISTINCT FROM NEW.status OR OLD.size_bytes IS DISTINCT FROM NEW.size_bytes
    OR OLD.storage_key IS DISTINCT FROM NEW.storage_key
    OR (OLD.deleted_at IS NULL) <> (NEW.deleted_at IS NULL) OR (OLD.purged_at IS NULL) <> (NEW.purged_at IS NULL)
  ) EXECUTE FUNCTION usage_track_file();

-- A version adds its object unless the file holds it already (as its current content or another version).
CREATE FUNCTION usage_track_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v file_versions;
  sign integer;
BEGIN
  IF TG_OP = 'INSERT' THEN v := NEW; sign := 1; ELSE v := OLD; sign := -1; END IF;
  IF NOT EXISTS (SELECT 1 FROM files WHERE id = v.file_id AND (purged_at IS NOT NULL OR storage_key = v.storage_key))
    AND NOT EXISTS (SELECT 1 FROM file_versions WHERE file_id = v.file_id AND storage_key = v.storage_key AND id <> v.id)
  THEN
    INSERT INTO project_usage_deltas (project_id, versions_bytes) VALUES (v.project_id, sign * v.size_bytes);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER file_versions_usage AFTER INSERT OR DELETE ON file_versions
  FOR EACH ROW EXECUTE FUNCTION usage_track_version();

-- New content reserves its bytes while it is uploaded and holds them while it is checked; once
-- committed it is a version (counted above), failed or quarantined it counts for nothing.
CREATE FUNCTION usage_track_content() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  old_status text;
  new_status text;
  old_size bigint := 0;
  new_size bigint := 0;
  project text;
BEGIN
  IF TG_OP <> 'INSERT' THEN old_status := OLD.status; old_size := OLD.size_bytes; project := OLD.project_id; END IF;
  IF TG_OP <> 'DELETE' THEN new_status := NEW.status; new_size := NEW.size_bytes; project := NEW.project_id; END IF;
  INSERT INTO project_usage_deltas (project_id, versions_reserved_bytes, versions_bytes) VALUES (project,
    usage_part(new_status, 'uploading', new_size) - usage_part(old_status, 'uploading', old_size),
    usage_part(new_status, 'processing', new_size) - usage_part(old_status, 'processing', old_size));
  RETURN NULL;
END $$;

CREATE TRIGGER pending_contents_usage AFTER INSERT OR DELETE ON pending_contents
  FOR EACH ROW EXECUTE FUNCTION usage_track_content();
CREATE TRIGGER pending_contents_usage_change AFTER UPDATE OF status, size_bytes ON pending_contents
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.size_bytes IS DISTINCT FROM NEW.size_bytes)
  EXECUTE FUNCTION usage_track_content();

-- The same numbers computed from the rows themselves: what the reconcile task compares the kept
-- ones with (and what they start from here).
CREATE VIEW project_usage_actual AS
WITH held AS (
  SELECT project_id, usage_bucket(status, deleted_at, purged_at) AS bucket, size_bytes FROM files
),
buckets AS (
  SELECT project_id,
    count(*) FILTER (WHERE bucket = 'uploading') AS uploading_files,
    coalesce(sum(size_bytes) FILTER (WHERE bucket = 'uploading'), 0) AS uploading_bytes,
    count(*) FILTER (WHERE bucket = 'processing') AS processing_files,
    coalesce(sum(size_bytes) FILTER (WHERE bucket = 'processing'), 0) AS processing_bytes,
    count(*) FILTER (WHERE bucket = 'ready') AS ready_files,
    coalesce(sum(size_bytes) FILTER (WHERE bucket = 'ready'), 0) AS ready_bytes,
    count(*) FILTER (WHERE bucket = 'failed') AS failed_files,
    coalesce(sum(size_bytes) FILTER (WHERE bucket = 'failed'), 0) AS failed_bytes,
    count(*) FILTER (WHERE bucket = 'quarantined') AS quarantined_files,
    coalesce(sum(size_bytes) FILTER (WHERE bucket = 'quarantined'), 0) AS quarantined_bytes,
    count(*) FILTER (WHERE bucket = 'deleted') AS deleted_files,
    coalesce(sum(size_bytes) FILTER (WHERE bucket = 'deleted'), 0) AS deleted_bytes
  FROM held WHERE bucket IS NOT NULL GROUP BY project_id
),
earlier_versions AS (
  SELECT project_id, sum(size_bytes) AS bytes FROM (
    SELECT DISTINCT ON (v.file_id, v.storage_key) v.project_id, v.size_bytes
    FROM file_versions v JOIN files f ON f.id = v.file_id
    WHERE f.purged_at IS NULL AND v.storage_key <> f.storage_key
  ) AS objects GROUP BY project_id
),
contents AS (
  SELECT project_id,
    coalesce(sum(size_bytes) FILTER (WHERE status = 'processing'), 0) AS checking_bytes,
    coalesce(sum(size_bytes) FILTER (WHERE status = 'uploading'), 0) AS uploading_bytes
  FROM pending_contents WHERE status IN ('uploading', 'processing') GROUP BY project_id
)
SELECT p.id AS project_id,
  coalesce(b.uploading_files, 0)::bigint AS uploading_files,
  coalesce(b.uploading_bytes, 0)::bigint AS uploading_bytes,
  coalesce(b.processing_files, 0)::bigint AS processing_files,
  coalesce(b.processing_bytes, 0)::bigint AS processing_bytes,
  coalesce(b.ready_files, 0)::bigint AS ready_files,
  coalesce(b.ready_bytes, 0)::bigint AS ready_bytes,
  coalesce(b.failed_files, 0)::bigint AS failed_files,
  coalesce(b.failed_bytes, 0)::bigint AS failed_bytes,
  coalesce(b.quarantined_files, 0)::bigint AS quarantined_files,
  coalesce(b.quarantined_bytes, 0)::bigint AS quarantined_bytes,
  coalesce(b.deleted_files, 0)::bigint AS deleted_files,
  coalesce(b.deleted_bytes, 0)::bigint AS deleted_bytes,
  (coalesce(e.bytes, 0) + coalesce(c.checking_bytes, 0))::bigint AS versions_bytes,
  coalesce(c.uploading_bytes, 0)::bigint AS versions_reserved_bytes
FROM projects p
LEFT JOIN buckets b ON b.project_id = p.id
LEFT JOIN earlier_versions e ON e.project_id = p.id
LEFT JOIN contents c ON c.project_id = p.id;

INSERT INTO project_usage SELECT * FROM project_usage_actual;

-- What the triggers keep: each project's row plus its deltas not folded yet.
CREATE VIEW project_usage_kept AS
SELECT project_id, sum(uploading_files)::bigint AS uploading_files, sum(uploading_bytes)::bigint AS uploading_bytes, sum(processing_files)::bigint AS processing_files, sum(processing_bytes)::bigint AS processing_bytes, sum(ready_files)::bigint AS ready_files, sum(ready_bytes)::bigint AS ready_bytes, sum(failed_files)::bigint AS failed_files, sum(failed_bytes)::bigint AS failed_bytes, sum(quarantined_files)::bigint AS quarantined_files, sum(quarantined_bytes)::bigint AS quarantined_bytes, sum(deleted_files)::bigint AS deleted_files, sum(deleted_bytes)::bigint AS deleted_bytes, sum(versions_bytes)::bigint AS versions_bytes, sum(versions_reserved_bytes)::bigint AS versions_reserved_bytes
FROM (
  SELECT project_id, uploading_files, uploading_bytes, processing_files, processing_bytes, ready_files, ready_bytes, failed_files, failed_bytes, quarantined_files, quarantined_bytes, deleted_files, deleted_bytes, versions_bytes, versions_reserved_bytes FROM project_usage
  UNION ALL
  SELECT project_id, uploading_files, uploading_bytes, processing_files, processing_bytes, ready_files, ready_bytes, failed_files, failed_bytes, quarantined_files, quarantined_bytes, deleted_files, deleted_bytes, versions_bytes, versions_reserved_bytes FROM project_usage_deltas
) AS parts
GROUP BY project_id;
