CREATE TABLE multipart_sessions (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  file_id text COLLATE "C" NOT NULL REFERENCES files (id),
  -- The object store's own id for the upload (S3 UploadId, or the local store's).
  store_upload_id text NOT NULL,
  storage_key text NOT NULL,
  total_size_bytes bigint NOT NULL,
  -- open → completing → completed, or open → aborted / expired.
  status text NOT NULL DEFAULT 'open',
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  expires_at timestamptz(3) NOT NULL,
  finished_at timestamptz(3)
);
CREATE INDEX multipart_sessions_expiry ON multipart_sessions (expires_at) WHERE status = 'open';
