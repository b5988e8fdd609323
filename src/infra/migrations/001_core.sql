CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;

-- Server-wide values every node must share: the URL signing secret, the generated admin key's hash.
CREATE TABLE server_settings (
  key text PRIMARY KEY,
  value text NOT NULL
);

CREATE TABLE organizations (
  id text COLLATE "C" PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now()
);

CREATE TABLE projects (
  id text COLLATE "C" PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations (id),
  name text NOT NULL,
  settings jsonb NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  updated_at timestamptz(3) NOT NULL DEFAULT now()
);
CREATE INDEX projects_organization ON projects (organization_id);

CREATE TABLE api_keys (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  name text NOT NULL,
  scopes text[] NOT NULL,
  -- SHA-256 of the whole key: keys are 256-bit random, so a fast hash is the right one.
  key_hash text NOT NULL UNIQUE,
  key_prefix text NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  revoked_at timestamptz(3)
);
CREATE INDEX api_keys_project ON api_keys (project_id, id);
