-- The tus endpoint: an upload's file, its multipart session, and what tus needs that the parts do not say.
CREATE TABLE tus_uploads (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  file_id text COLLATE "C" NOT NULL REFERENCES files (id),
  -- None when the whole file came with its creation (written at once, no parts).
  session_id text COLLATE "C" UNIQUE REFERENCES multipart_sessions (id),
  -- The API key or upload token that created it: only it (or a token of the same owner) continues it.
  created_by text NOT NULL,
  -- Null while the length is deferred (Upload-Defer-Length).
  upload_length bigint,
  upload_offset bigint NOT NULL DEFAULT 0,
  -- The parts stored so far, in order ([{part_number, etag, size}]), and the number the next one takes.
  parts jsonb NOT NULL DEFAULT '[]',
  next_part integer NOT NULL DEFAULT 1,
  -- Bytes received after the last part, fewer than the store's smallest part: small objects of the
  -- store, in order ([{key, size}]), read back into the next part and then retired.
  tail jsonb NOT NULL DEFAULT '[]',
  -- Upload-Metadata as the client sent it, answered by HEAD.
  metadata text,
  -- The PATCH writing it, on whichever node: renewed while it runs, its bytes' progress noted.
  lock_id text,
  locked_at timestamptz(3),
  progress_at timestamptz(3),
  created_at timestamptz(3) NOT NULL DEFAULT now()
);
-- Uploads whose session ended with bytes still waiting outside it (their tail is retired by a sweep).
CREATE INDEX tus_uploads_tail ON tus_uploads (session_id) WHERE tail <> '[]';
