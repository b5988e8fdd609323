-- The S3-compatible endpoint: a project is a bucket.

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
