CREATE TABLE folders (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  parent_id text COLLATE "C" REFERENCES folders (id),
  name text NOT NULL,
  -- Slash-joined names from the root ("photos/2024"), kept right for the whole subtree on rename and move.
  path text NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX folders_sibling_name ON folders (project_id, (coalesce(parent_id, '')), name);
CREATE UNIQUE INDEX folders_path ON folders (project_id, path text_pattern_ops);

CREATE TABLE files (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  folder_id text COLLATE "C" REFERENCES folders (id) ON DELETE SET NULL,
  status text NOT NULL,
  filename text NOT NULL,
  content_type text NOT NULL,
  size_bytes bigint NOT NULL,
  category text NOT NULL,
  storage_key text NOT NULL,
  checksum_sha256 text,
  metadata jsonb NOT NULL DEFAULT '{}',
  tags text[] NOT NULL DEFAULT '{}',
  owner_user_id text,
  owner_org_id text,
  upload_token_id text,
  legal_hold boolean NOT NULL DEFAULT false,
  legal_hold_reason text,
  failure_reason text,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now(),
  upload_expires_at timestamptz(3),
  deleted_at timestamptz(3),
  -- When the background collector removed the stored objects of a deleted or abandoned file.
  purged_at timestamptz(3)
);
-- Listing: newest first is id order (ids are time-sortable), keyset pagination on id.
CREATE INDEX files_list ON files (project_id, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_folder ON files (project_id, folder_id, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_status ON files (project_id, status, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_category ON files (project_id, category, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX files_created ON files (project_id, created_at) WHERE deleted_at IS NULL;
CREATE INDEX files_size ON files (project_id, size_bytes) WHERE deleted_at IS NULL;
CREATE INDEX files_filename_trgm ON files USING gin (lower(filename) gin_trgm_ops);
CREATE INDEX files_tags ON files USING gin (tags);
CREATE INDEX files_metadata ON files USING gin (metadata jsonb_path_ops);
CREATE INDEX files_upload_token ON files (upload_token_id) WHERE upload_token_id IS NOT NULL;
-- Background collection: deleted files awaiting purge, uploads never confirmed.
CREATE INDEX files_purge ON files (deleted_at) WHERE deleted_at IS NOT NULL AND purged_at IS NULL;
CREATE INDEX files_abandoned ON files (upload_expires_at) WHERE status = 'uploading' AND deleted_at IS NULL;

-- The outbox: every event is written in the transaction of the change that fired it.
CREATE TABLE events (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  type text NOT NULL,
  file_id text COLLATE "C",
  payload jsonb NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX events_project ON events (project_id, id);

CREATE TABLE metadata_schemas (
  project_id text PRIMARY KEY REFERENCES projects (id),
  schema jsonb NOT NULL,
  is_active boolean NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now()
);

-- Durable background work (the processing pipeline): claimed with FOR UPDATE SKIP LOCKED,
-- leased by pushing run_at forward, so a crashed worker's job is picked up again.
CREATE TABLE jobs (
  id text COLLATE "C" PRIMARY KEY,
  kind text NOT NULL,
  project_id text NOT NULL REFERENCES projects (id),
  file_id text COLLATE "C",
  -- Full precision: rounded to milliseconds, a job due now could read as due just after now.
  run_at timestamptz NOT NULL DEFAULT now(),
  attempts integer NOT NULL DEFAULT 0,
  last_error text,
  created_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX jobs_due ON jobs (kind, run_at);

CREATE TABLE upload_tokens (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  token_hash text NOT NULL UNIQUE,
  max_size bigint NOT NULL,
  allowed_mime_types text[] NOT NULL,
  max_files integer NOT NULL,
  -- Counted when an upload is initiated, by a guarded UPDATE: holds under concurrency.
  files_used integer NOT NULL DEFAULT 0,
  folder_id text COLLATE "C" REFERENCES folders (id) ON DELETE SET NULL,
  metadata jsonb,
  tags text[],
  owner_user_id text,
  owner_org_id text,
  expires_at timestamptz(3) NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX upload_tokens_expiry ON upload_tokens (expires_at);
