-- Image renditions kept in the object store, one row per stored object: its size counts towards
-- COFFER_RENDITION_CACHE_BYTES, and the least recently used go first once the total is past it.
-- The key derives from the source's content and the normalised parameters, so a new content of the
-- file never meets an old rendition; the rows (and objects) of a file go when the file is collected.
CREATE TABLE renditions (
  key text PRIMARY KEY,
  file_id text NOT NULL,
  project_id text NOT NULL,
  content_type text NOT NULL,
  size_bytes bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX renditions_file ON renditions (file_id);
CREATE INDEX renditions_last_used ON renditions (last_used_at);
