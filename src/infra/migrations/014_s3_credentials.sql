-- The S3-compatible endpoint: a project is a bucket, reached with S3 credentials of its own.

-- A bucket name per project, unique on the server (the S3 endpoint is path-style: /s3/{bucket}/{key}).
ALTER TABLE projects ADD COLUMN bucket text COLLATE "C";
ALTER TABLE projects ADD CONSTRAINT projects_bucket_key UNIQUE (bucket);

-- Existing projects get one derived from their name as new ones do (projects/service.ts deriveBucket):
-- accents dropped, lowercased, other characters turned to hyphens, trimmed, fitted to 3..63
-- characters, and a random suffix when the name is too short or already taken.
DO $$
DECLARE
  project record;
  base text;
  candidate text;
BEGIN
  FOR project IN SELECT id, name FROM projects ORDER BY id LOOP
    base := lower(project.name);
    IF current_setting('server_encoding') = 'UTF8' THEN
      base := regexp_replace(normalize(base, NFKD), '[\u0300-\u036f]', '', 'g');
    END IF;
    base := trim(BOTH '-' FROM regexp_replace(base, '[^a-z0-9]+', '-', 'g'));
    base := rtrim(left(base, 63), '-');
    IF base = '' THEN
      base := 'project';
    END IF;
    candidate := base;
    WHILE length(candidate) < 3 OR EXISTS (SELECT 1 FROM projects WHERE bucket = candidate) LOOP
      candidate := rtrim(left(base, 56), '-') || '-' || substr(md5(random()::text), 1, 6);
    END LOOP;
    UPDATE projects SET bucket = candidate WHERE id = project.id;
  END LOOP;
END $$;

ALTER TABLE projects ALTER COLUMN bucket SET NOT NULL;
ALTER TABLE projects ADD CONSTRAINT projects_bucket_format
  CHECK (bucket ~ '^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$');

-- Long-lived S3 credentials of a project, made with the admin key. SigV4 needs the secret itself
-- (not a hash) to check a signature, so it is stored sealed: an AES-256-GCM envelope under the
-- server key (COFFER_SECRET_KEY, or the embedded data dir's secret.key), bound to the access key id.
-- Temporary credentials are not stored: their session token carries what they are.
CREATE TABLE s3_credentials (
  id text COLLATE "C" PRIMARY KEY,
  project_id text COLLATE "C" NOT NULL REFERENCES projects (id),
  name text NOT NULL,
  access_key_id text COLLATE "C" NOT NULL UNIQUE CHECK (access_key_id ~ '^CFR[A-Z0-9]{17}$'),
  secret_sealed text NOT NULL,
  -- a subset of files:read, files:upload, files:delete
  scopes text[] NOT NULL,
  created_at timestamptz(3) NOT NULL DEFAULT now(),
  revoked_at timestamptz(3)
);
CREATE INDEX s3_credentials_project ON s3_credentials (project_id, id);
