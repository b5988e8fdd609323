-- Exact totals of the common listings (everything, by status, category, folder, or one tag) without
-- counting a project's rows: a million files took longer to count than a page takes to serve.
--
-- Every change to whether a file is listed, or to its status, category, folder or tags, appends its -1
-- and +1 to file_count_deltas in the transaction of the change. An insert locks no row, so uploads
-- never wait on each other for it. A total is the sum of the project's rows of file_counts and of its
-- deltas, read in one statement (one snapshot); fold_file_counts() moves deltas into file_counts.
--
-- A row counts files either by (status, category, folder), its tag '', or by one tag, its status,
-- category and folder ''. The folder is '' at the root; '*' sums every folder (kept by the fold only,
-- so that a total over all folders sums a few rows, not one per folder).
CREATE TABLE file_counts (
  project_id text COLLATE "C" NOT NULL REFERENCES projects (id),
  tag text NOT NULL,
  status text NOT NULL,
  category text NOT NULL,
  folder text COLLATE "C" NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (project_id, tag, status, category, folder)
);

CREATE TABLE file_count_deltas (
  project_id text COLLATE "C" NOT NULL,
  tag text NOT NULL,
  status text NOT NULL,
  category text NOT NULL,
  folder text COLLATE "C" NOT NULL,
  n integer NOT NULL
);
CREATE INDEX file_count_deltas_project ON file_count_deltas (project_id);

CREATE FUNCTION file_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
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
    END IF;
    IF is_listed AND cardinality(NEW.tags) > 0 THEN
      INSERT INTO file_count_deltas SELECT NEW.project_id, tag, '', '', '', 1 FROM unnest(NEW.tags) AS tag;
    END IF;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER files_counts AFTER INSERT OR DELETE ON files
  FOR EACH ROW EXECUTE FUNCTION file_counts_track();
CREATE TRIGGER files_counts_change AFTER UPDATE OF status, category, folder_id, tags, deleted_at ON files
  FOR EACH ROW WHEN (
    OLD.status IS DISTINCT FROM NEW.status OR OLD.category IS DISTINCT FROM NEW.category
    OR OLD.folder_id IS DISTINCT FROM NEW.folder_id OR OLD.tags IS DISTINCT FROM NEW.tags
    OR (OLD.deleted_at IS NULL) <> (NEW.deleted_at IS NULL)
  ) EXECUTE FUNCTION file_counts_track();

-- Moves the project's deltas into its counts. Two folds at once never count a delta twice: the
-- second waits on the rows the first deletes, and finds them gone.
CREATE FUNCTION fold_file_counts(project text) RETURNS void LANGUAGE sql AS $$
  WITH moved AS (
    DELETE FROM file_count_deltas WHERE project_id = project RETURNING tag, status, category, folder, n
  ), sums AS (
    SELECT tag, status, category, folder, sum(n) AS n FROM moved GROUP BY tag, status, category, folder
    UNION ALL
    SELECT tag, status, category, '*', sum(n) FROM moved WHERE tag = '' GROUP BY tag, status, category
  )
  INSERT INTO file_counts AS c (project_id, tag, status, category, folder, n)
  SELECT project, tag, status, category, folder, n FROM sums
  ON CONFLICT (project_id, tag, status, category, folder) DO UPDATE SET n = c.n + excluded.n
$$;

INSERT INTO file_counts (project_id, tag, status, category, folder, n)
SELECT project_id, '', status, category, coalesce(folder_id, ''), count(*) FROM files
WHERE deleted_at IS NULL GROUP BY project_id, status, category, coalesce(folder_id, '');
INSERT INTO file_counts (project_id, tag, status, category, folder, n)
SELECT project_id, '', status, category, '*', sum(n) FROM file_counts WHERE tag = ''
GROUP BY project_id, status, category;
INSERT INTO file_counts (project_id, tag, status, category, folder, n)
SELECT project_id, tag, '', '', '', count(*) FROM files, unnest(tags) AS tag
WHERE deleted_at IS NULL GROUP BY project_id, tag;
