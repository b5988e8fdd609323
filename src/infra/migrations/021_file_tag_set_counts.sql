-- Exact totals of listings filtered by several tags alone, kept like those of 013 instead of counted:
-- counting the files that hold two tags reads each of them in the table (the tags' index finds them,
-- it cannot tell whether they are deleted), thousands of scattered pages at a million files.
--
-- A row counts the listed files of one whole tag set (distinct, sorted), only sets of two tags or more
-- (no filter of several tags matches a file of fewer). The total of files holding every given tag is
-- the sum over the sets that contain them, found through the GIN index: a project holds at most as
-- many sets as files, and in practice far fewer. Changes go to file_tag_set_deltas in the transaction
-- of the change and fold_file_counts() moves them into the counts, as in 013.
CREATE FUNCTION tag_set(tags text[]) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
  SELECT ARRAY(SELECT DISTINCT tag COLLATE "C" FROM unnest(tags) AS tag ORDER BY 1)
$$;

CREATE TABLE file_tag_set_counts (
  project_id text COLLATE "C" NOT NULL REFERENCES projects (id),
  -- SHA-256 of the set: 50 tags of 64 characters are past what a btree key may hold.
  set_key bytea NOT NULL,
  tags text[] NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (project_id, set_key)
);
CREATE INDEX file_tag_set_counts_tags ON file_tag_set_counts USING gin (tags);

CREATE TABLE file_tag_set_deltas (
  project_id text COLLATE "C" NOT NULL,
  tags text[] NOT NULL,
  n integer NOT NULL
);
CREATE INDEX file_tag_set_deltas_project ON file_tag_set_deltas (project_id);

-- 013's, with the tag set's delta beside the tags' own.
CREATE OR REPLACE FUNCTION file_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  -- A listed file is one not deleted.
  was_listed boolean := TG_OP <> 'INSERT' AND OLD.deleted_at IS NULL;
  is_listed boolean := TG_OP <> 'DELETE' AND NEW.deleted_at IS NULL;
  moved boolean := TG_OP <> 'UPDATE' OR was_listed <> is_listed;
BEGIN
  IF moved OR OLD.status <> NEW.status OR OLD.category <> NEW.category
     OR OLD.folder_id IS DISTINCT FROM NEW.folder_id THEN
    IF was_listed THEN
      INSERT INTO file_count_deltas
      VALUES (OLD.project_id, '', OLD.status, OLD.category, coalesce(OLD.folder_id, ''), -1);
    END IF;
    IF is_listed THEN
      INSERT INTO file_count_deltas
      VALUES (NEW.project_id, '', NEW.status, NEW.category, coalesce(NEW.folder_id, ''), 1);
    END IF;
  END IF;
  IF moved OR OLD.tags IS DISTINCT FROM NEW.tags THEN
    IF was_listed AND cardinality(OLD.tags) > 0 THEN
      INSERT INTO file_count_deltas SELECT OLD.project_id, tag, '', '', '', -1 FROM unnest(OLD.tags) AS tag;
      IF cardinality(OLD.tags) > 1 THEN
        INSERT INTO file_tag_set_deltas VALUES (OLD.project_id, tag_set(OLD.tags), -1);
      END IF;
    END IF;
    IF is_listed AND cardinality(NEW.tags) > 0 THEN
      INSERT INTO file_count_deltas SELECT NEW.project_id, tag, '', '', '', 1 FROM unnest(NEW.tags) AS tag;
      IF cardinality(NEW.tags) > 1 THEN
        INSERT INTO file_tag_set_deltas VALUES (NEW.project_id, tag_set(NEW.tags), 1);
      END IF;
    END IF;
  END IF;
  RETURN NULL;
END $$;

-- 013's, folding the tag sets' deltas too (in the same way: a delta is moved once).
CREATE OR REPLACE FUNCTION fold_file_counts(project text) RETURNS void LANGUAGE sql AS $$
  WITH moved AS (
    DELETE FROM file_count_deltas WHERE project_id = project RETURNING tag, status, category, folder, n
  ), sums AS (
    SELECT tag, status, category, folder, sum(n) AS n FROM moved GROUP BY tag, status, category, folder
    UNION ALL
    SELECT tag, status, category, '*', sum(n) FROM moved WHERE tag = '' GROUP BY tag, status, category
  )
  INSERT INTO file_counts AS c (project_id, tag, status, category, folder, n)
  SELECT project, tag, status, category, folder, n FROM sums
  ON CONFLICT (project_id, tag, status, category, folder) DO UPDATE SET n = c.n + excluded.n;

  WITH moved AS (
    DELETE FROM file_tag_set_deltas WHERE project_id = project RETURNING tags, n
  )
  INSERT INTO file_tag_set_counts AS c (project_id, set_key, tags, n)
  SELECT project, sha256(convert_to(tags::text, 'UTF8')), tags, sum(n) FROM moved GROUP BY tags
  ON CONFLICT (project_id, set_key) DO UPDATE SET n = c.n + excluded.n;
$$;

INSERT INTO file_tag_set_deltas (project_id, tags, n)
SELECT project_id, tag_set(tags), count(*) FROM files
WHERE deleted_at IS NULL AND cardinality(tags) > 1 GROUP BY 1, 2;
SELECT fold_file_counts(id) FROM projects;
