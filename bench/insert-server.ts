/**
 * Baseline B1 of the small-upload benchmark: the least a JSON API can do per request on the same
 * database. A bare Fastify route, POST /files, parses the JSON body and INSERTs one row, through `pg`
 * (PostgreSQL) or PGlite (embedded), into a table as wide as Coffer's `files` (the same columns, with
 * its primary key only), and answers 201 with the row's id. No authentication, validation, transaction,
 * event or object store. Started by bench/helper-servers.ts (startInsertServer) as a child process, so that it gets
 * a core of its own as Coffer does, with the same pool size as Coffer (20 connections).
 *
 * Environment: PORT, BENCH_B1_DATABASE_URL (PostgreSQL) or BENCH_B1_DATA_DIR (PGlite).
 */
import { randomUUID } from 'node:crypto';
import { PGlite } from '@electric-sql/pglite';
import Fastify from 'fastify';
import pg from 'pg';

const TABLE = `CREATE TABLE IF NOT EXISTS files (
  id text COLLATE "C" PRIMARY KEY,
  project_id text NOT NULL,
  folder_id text COLLATE "C",
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
  purged_at timestamptz(3),
  scan_signature text
)`;

const INSERT = `INSERT INTO files (id, project_id, folder_id, status, filename, content_type, size_bytes, category,
  storage_key, metadata, tags, owner_user_id, owner_org_id, upload_token_id, upload_expires_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13, $14, $15) RETURNING id`;

type Query = (sql: string, params?: unknown[]) => Promise<{ rows: { id: string }[] }>;

async function open(): Promise<Query> {
  const url = process.env.BENCH_B1_DATABASE_URL;
  if (url) {
    const pool = new pg.Pool({ connectionString: url, max: 20 });
    return (sql, params) => pool.query(sql, params);
  }
  const db = await PGlite.create({ dataDir: process.env.BENCH_B1_DATA_DIR });
  return (sql, params) => db.query(sql, params);
}

const query = await open();
await query(TABLE);
const app = Fastify();
app.post('/files', async (request, reply) => {
  const body = request.body as { filename: string; content_type: string; size_bytes: number };
  const id = `file_${randomUUID()}`;
  const { rows } = await query(INSERT, [
    id,
    'proj_b1',
    null,
    'uploading',
    body.filename,
    body.content_type,
    body.size_bytes,
    'other',
    `proj_b1/${id}`,
    '{}',
    [],
    null,
    null,
    null,
    new Date(Date.now() + 3_600_000),
  ]);
  return reply.code(201).send({ file_id: rows[0]!.id });
});
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.stdout.write('ready\n');
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
