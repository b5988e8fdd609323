-- One row per management action and per destructive or privileged file action, written in the
-- transaction of the change. Ids are time-sortable (aud_<ULID>) and created_at is the id's own
-- time, so a time range is a range of ids: each index below serves a filter, the newest-first
-- order, the cursor and the time range at once, and retention deletes by primary key.
-- No foreign keys: an entry outlives what it names, and never locks it.
CREATE TABLE audit_log (
  id text COLLATE "C" PRIMARY KEY,
  created_at timestamptz(3) NOT NULL,
  organization_id text NOT NULL,
  -- null for an action on the organization itself (its creation)
  project_id text,
  action text NOT NULL,
  -- admin (the admin key), api_key, upload_token, cli (coffer admin bootstrap)
  actor_type text NOT NULL,
  -- key_… or tok_…; null for the admin key and the CLI
  actor_id text,
  client_ip text,
  request_id text,
  -- the ids the action was about: {"file_id": …, "version_id": …}
  targets jsonb NOT NULL,
  -- what changed, never a secret
  before jsonb,
  after jsonb
);
CREATE INDEX audit_log_project ON audit_log (project_id, id) WHERE project_id IS NOT NULL;
CREATE INDEX audit_log_project_action ON audit_log (project_id, action, id) WHERE project_id IS NOT NULL;
CREATE INDEX audit_log_project_actor ON audit_log (project_id, actor_type, actor_id, id)
  WHERE project_id IS NOT NULL;
CREATE INDEX audit_log_organization ON audit_log (organization_id, id);
