CREATE TABLE file_versions (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  file_id text COLLATE "C" NOT NULL REFERENCES files (id),
  version_number integer NOT NULL,
  storage_key text NOT NULL,
  size_bytes bigint NOT NULL,
  content_type text NOT NULL,
  checksum_sha256 text,
  -- Why the version exists: new bytes were uploaded, or an earlier version was restored.
  reason text NOT NULL,
  source_version_id text COLLATE "C",
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  UNIQUE (file_id, version_number)
);

-- New bytes for an existing file, on their way to becoming its current content (and a version).
CREATE TABLE pending_contents (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  file_id text COLLATE "C" NOT NULL REFERENCES files (id),
  storage_key text NOT NULL,
  size_bytes bigint NOT NULL,
  content_type text NOT NULL,
  checksum_sha256 text,
  -- uploading → processing → committed, or failed / quarantined (the file keeps its content).
  status text NOT NULL DEFAULT 'uploading',
  failure_reason text,
  scan_signature text,
  upload_expires_at timestamptz(3),
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now(),
  purged_at timestamptz(3)
);
CREATE INDEX pending_contents_file ON pending_contents (file_id);
CREATE INDEX pending_contents_abandoned ON pending_contents (upload_expires_at) WHERE status = 'uploading';

ALTER TABLE jobs ADD COLUMN content_id text COLLATE "C";
