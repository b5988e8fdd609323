/**
 * Seeds the files of one project straight into Coffer's database for bench/list.ts, in batches of
 * INSERT … SELECT over generate_series (a million rows in well under a minute on PostgreSQL), with
 * what a real project holds spread realistically:
 *   - created_at over the two years before now, ids in the same order (a ULID of that moment);
 *   - statuses: ready 92%, uploading 3%, failed 3%, processing 1%, quarantined 1%; 2% deleted;
 *   - in the steady state a running Coffer keeps: uploads under way until their URLs expire, the objects
 *     of deleted files collected (else the collector starts on a backlog of 50,000 at a million);
 *   - categories by content type: image 45%, document 25%, other 12%, video 8%, audio 5%, archive 5%;
 *   - sizes log-uniform from 1 KiB to 100 MiB; filenames from a few dozen words, a number and an extension;
 *   - 0 to 3 tags of 40 (the first ones more frequent), 40% without; metadata {customer, source}, and
 *     {invoice} on documents; 70% in one of 200 folders (the first ones fuller), 30% at the root.
 * Triggers are off while the rows go in (kept per row, the project's usage would be rewritten a million
 * times in one transaction); the usage is then computed from the rows, as Coffer's reconciliation does.
 */
import pg from 'pg';
import type { Queryable } from '../src/infra/db.ts';

export const FOLDERS = 200;
export const TAGS = Array.from({ length: 40 }, (_, i) => `tag${String(i + 1).padStart(2, '0')}`);
export const CUSTOMERS = 5000;
const BATCH = 100_000;

/** Crockford base32 of a ULID, for ids made in SQL in Coffer's own format (file_<ULID>): one expression, inlined. */
const ALPHABET = "'0123456789ABCDEFGHJKMNPQRSTVWXYZ'";
const timeChar = (shift: number) => `substr(${ALPHABET}, ((ms >> ${shift}) & 31)::int + 1, 1)`;
const randomChar = `substr(${ALPHABET}, floor(random() * 32)::int + 1, 1)`;
const ULID_FUNCTIONS = `
CREATE OR REPLACE FUNCTION pg_temp.bench_ulid_of(ms bigint) RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT ${Array.from({ length: 10 }, (_, i) => timeChar(5 * (9 - i))).join(' || ')}
    || ${Array.from({ length: 16 }, () => randomChar).join(' || ')}
$$;
CREATE OR REPLACE FUNCTION pg_temp.bench_ulid(at timestamptz) RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT pg_temp.bench_ulid_of(floor(extract(epoch FROM at) * 1000)::bigint)
$$`;

/** One batch: rows `from`..`to` of `total`, the n-th made at now − 2 years + n/total of it. */
const INSERT_BATCH = `
WITH n AS (
  SELECT g, random() AS r_status, random() AS r_type, random() AS r_deleted, random() AS r_folder,
    random() AS r_tags, random() AS r_size, random() AS r_name,
    now() - interval '730 days' + (g::float8 / $3) * interval '730 days' AS at
  FROM generate_series($1::int, $2::int) AS g
), typed AS (
  SELECT n.*,
    CASE WHEN r_type < 0.35 THEN 'image/jpeg' WHEN r_type < 0.45 THEN 'image/png'
         WHEN r_type < 0.65 THEN 'application/pdf' WHEN r_type < 0.70 THEN 'text/plain'
         WHEN r_type < 0.82 THEN 'application/octet-stream' WHEN r_type < 0.90 THEN 'video/mp4'
         WHEN r_type < 0.95 THEN 'audio/mpeg' ELSE 'application/zip' END AS content_type,
    'file_' || pg_temp.bench_ulid(at) AS id
  FROM n
), named AS (
  SELECT typed.*,
    CASE WHEN r_folder < 0.3 THEN NULL ELSE ($5::text[])[1 + floor(power((r_folder - 0.3) / 0.7, 2) * ${FOLDERS})::int] END AS folder,
    (ARRAY['invoice', 'report', 'IMG', 'photo', 'scan', 'contract', 'receipt', 'avatar', 'backup', 'export',
         'holiday', 'meeting', 'notes', 'summary', 'draft', 'final', 'budget', 'logo', 'banner', 'video',
         'recording', 'podcast', 'statement', 'payslip', 'letter', 'memo', 'slide', 'diagram', 'screenshot',
         'archive'])[1 + floor(r_name * 30)::int]
    || '-' || g || CASE content_type WHEN 'image/jpeg' THEN '.jpg' WHEN 'image/png' THEN '.png'
      WHEN 'application/pdf' THEN '.pdf' WHEN 'text/plain' THEN '.txt' WHEN 'video/mp4' THEN '.mp4'
      WHEN 'audio/mpeg' THEN '.mp3' WHEN 'application/zip' THEN '.zip' ELSE '.bin' END AS name
  FROM typed
)
INSERT INTO files (id, project_id, folder_id, status, filename, s3_key, content_type, size_bytes, category,
  storage_key, checksum_sha256, metadata, tags, created_at, updated_at, upload_expires_at, deleted_at, purged_at)
SELECT id, $4, folder,
  CASE WHEN r_status < 0.92 THEN 'ready' WHEN r_status < 0.95 THEN 'uploading' WHEN r_status < 0.98 THEN 'failed'
       WHEN r_status < 0.99 THEN 'processing' ELSE 'quarantined' END,
  name,
  -- Triggers are off while seeding (session_replication_role): the S3 key is written here.
  coalesce((SELECT path FROM folders WHERE folders.id = folder) || '/', '') || name,
  content_type,
  floor(exp(ln(1024) + r_size * ln(102400)))::bigint,
  CASE WHEN content_type LIKE 'image/%' THEN 'image' WHEN content_type LIKE 'video/%' THEN 'video'
       WHEN content_type LIKE 'audio/%' THEN 'audio' WHEN content_type = 'application/zip' THEN 'archive'
       WHEN content_type IN ('application/pdf', 'text/plain') THEN 'document' ELSE 'other' END,
  $4 || '/' || id || '/' || pg_temp.bench_ulid(at),
  md5(id) || md5(id || 'x'),
  jsonb_build_object('customer', 'cust_' || (g % ${CUSTOMERS}), 'source', (ARRAY['web', 'mobile', 'api'])[1 + g % 3])
    || CASE WHEN content_type = 'application/pdf' THEN jsonb_build_object('invoice', 'INV-' || g) ELSE '{}' END,
  CASE WHEN r_tags < 0.4 THEN '{}'::text[]
       ELSE (SELECT array_agg(DISTINCT ($6::text[])[1 + floor(power(random(), 2) * ${TAGS.length})::int])
             FROM generate_series(1, 1 + floor((r_tags - 0.4) / 0.6 * 3)::int) AS t WHERE g > 0) END,
  at, at,
  -- As a running Coffer leaves them: uploads still under way, deleted files' objects collected.
  CASE WHEN r_status >= 0.92 AND r_status < 0.95 THEN now() + interval '1 hour' END,
  CASE WHEN r_deleted < 0.02 THEN at + interval '1 day' END,
  CASE WHEN r_deleted < 0.02 THEN at + interval '2 days' END
FROM named`;

export interface Seeded {
  folderIds: string[];
  seconds: number;
}

/** Seeds `count` files and FOLDERS folders into `projectId` of the PostgreSQL database at `url`. */
export async function seedFiles(
  url: string,
  projectId: string,
  count: number,
  onProgress: (done: number) => void,
): Promise<Seeded> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const db: Queryable = {
      query: async <T>(sql: string, params?: unknown[]) => (await client.query(sql, params)).rows as T[],
      exec: async (sql: string) => void (await client.query(sql)),
    };
    return await seedInto(db, projectId, count, onProgress);
  } finally {
    await client.end();
  }
}

/**
 * The same into one connection `db` that nothing else uses meanwhile (its session settings and
 * temporary functions are the seed's): a pg client, or the embedded database of a stopped server.
 */
export async function seedInto(
  db: Queryable,
  projectId: string,
  count: number,
  onProgress: (done: number) => void,
): Promise<Seeded> {
  const start = performance.now();
  await db.exec(ULID_FUNCTIONS);
  await db.query('SET session_replication_role = replica');
  const rows = await db.query<{ id: string }>(
    `INSERT INTO folders (id, project_id, name, path)
     SELECT 'fld_' || pg_temp.bench_ulid(now() - interval '731 days' + g * interval '1 second'), $1,
            'folder-' || g, 'folder-' || g
     FROM generate_series(1, $2::int) AS g
     RETURNING id`,
    [projectId, FOLDERS],
  );
  const folderIds = rows.map((row) => row.id).sort();
  for (let from = 1; from <= count; from += BATCH) {
    const to = Math.min(count, from + BATCH - 1);
    await db.query(INSERT_BATCH, [from, to, count, projectId, folderIds, TAGS]);
    onProgress(to);
  }
  await db.query('SET session_replication_role = DEFAULT');
  const [usage] = await db.query<{ view: string | null }>(
    "SELECT to_regclass('project_usage_actual') AS view",
  );
  if (usage?.view) {
    await db.query('BEGIN');
    await db.query('DELETE FROM project_usage WHERE project_id = $1', [projectId]);
    await db.query('INSERT INTO project_usage SELECT * FROM project_usage_actual WHERE project_id = $1', [
      projectId,
    ]);
    await db.query('COMMIT');
  }
  // The kept counts of listings (migration 013), likewise.
  await db.query('BEGIN');
  await db.query('DELETE FROM file_count_deltas WHERE project_id = $1', [projectId]);
  await db.query('DELETE FROM file_tag_set_deltas WHERE project_id = $1', [projectId]);
  await db.query('DELETE FROM file_counts WHERE project_id = $1', [projectId]);
  await db.query(
    `INSERT INTO file_counts (project_id, tag, status, category, folder, n)
     SELECT project_id, '', status, category, coalesce(folder_id, ''), count(*) FROM files
     WHERE project_id = $1 AND deleted_at IS NULL GROUP BY 1, 3, 4, 5`,
    [projectId],
  );
  await db.query(
    `INSERT INTO file_counts (project_id, tag, status, category, folder, n)
     SELECT project_id, '', status, category, '*', sum(n) FROM file_counts
     WHERE project_id = $1 AND tag = '' GROUP BY 1, 3, 4`,
    [projectId],
  );
  await db.query(
    `INSERT INTO file_counts (project_id, tag, status, category, folder, n)
     SELECT project_id, tag, '', '', '', count(*) FROM files, unnest(tags) AS tag
     WHERE project_id = $1 AND deleted_at IS NULL GROUP BY 1, 2`,
    [projectId],
  );
  // Those of tag sets (migration 021): the sets' changes, folded as Coffer folds them.
  await db.query('DELETE FROM file_tag_set_counts WHERE project_id = $1', [projectId]);
  await db.query(
    `INSERT INTO file_tag_set_deltas (project_id, tags, n)
     SELECT project_id, tag_set(tags), count(*) FROM files
     WHERE project_id = $1 AND deleted_at IS NULL AND cardinality(tags) > 1 GROUP BY 1, 2`,
    [projectId],
  );
  await db.query('SELECT fold_file_counts($1)', [projectId]);
  await db.query('COMMIT');
  // What a database that grew over two years would have: statistics, and the visibility map that
  // lets counts read the indexes alone.
  await db.query('VACUUM (ANALYZE) files, file_tag_set_counts, file_tag_set_deltas');
  await db.query('ANALYZE folders');
  return { folderIds, seconds: (performance.now() - start) / 1000 };
}
