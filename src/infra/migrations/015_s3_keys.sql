-- The S3 view of a project's files. A file's key is its folder's path and its name joined by '/'
-- (`photos/2026/cat.jpg`), kept with every change to either, so that ListObjects walks one index in
-- binary key order and GetObject finds a key in one probe. A folder is the key `path/`.
ALTER TABLE files ADD COLUMN s3_key text COLLATE "C";

CREATE FUNCTION files_s3_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.s3_key := CASE WHEN NEW.folder_id IS NULL THEN NEW.filename
    ELSE (SELECT path FROM folders WHERE id = NEW.folder_id) || '/' || NEW.filename END;
  RETURN NEW;
END $$;
CREATE TRIGGER files_s3_key BEFORE INSERT OR UPDATE OF folder_id, filename ON files
  FOR EACH ROW EXECUTE FUNCTION files_s3_key();

-- A folder renamed or moved changes its path (and its subtree's, one row each): its files follow.
CREATE FUNCTION folders_s3_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE files SET s3_key = NEW.path || '/' || filename WHERE folder_id = NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER folders_s3_keys AFTER UPDATE OF path ON folders
  FOR EACH ROW WHEN (OLD.path IS DISTINCT FROM NEW.path) EXECUTE FUNCTION folders_s3_keys();

UPDATE files SET s3_key = CASE WHEN folder_id IS NULL THEN filename
  ELSE (SELECT path FROM folders WHERE folders.id = files.folder_id) || '/' || filename END;
ALTER TABLE files ALTER COLUMN s3_key SET NOT NULL;

-- Only files S3 shows: not deleted, and past their upload (a key resolves to the newest of them).
CREATE INDEX files_s3_key ON files (project_id, s3_key, id DESC)
  WHERE deleted_at IS NULL AND status IN ('processing', 'ready');
CREATE INDEX folders_s3_key ON folders (project_id, (path || '/') COLLATE "C");

-- The ETag S3 clients see (the store's, as it was sealed: an MD5 for bytes written through the S3
-- endpoint), so that listings need no store round trip; null for files stored before it was kept.
ALTER TABLE files ADD COLUMN etag text;
ALTER TABLE pending_contents ADD COLUMN etag text;

-- Objects no file refers to any more (content replaced where versioning is off), removed by the
-- collector after the grace period.
CREATE TABLE retired_objects (
  storage_key text COLLATE "C" PRIMARY KEY,
  project_id text COLLATE "C" NOT NULL,
  retired_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX retired_objects_due ON retired_objects (retired_at);

-- An S3 multipart upload declares no size: its session holds the most it may take, and the size is
-- the parts' when it completes.
ALTER TABLE multipart_sessions ADD COLUMN size_deferred boolean NOT NULL DEFAULT false;
