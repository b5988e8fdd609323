import type { Db, Queryable } from './db.ts';
import { inSpan, spansEnabled } from './spans.ts';

/** The statement's verb (SELECT, INSERT, WITH…): a span name that stays the same whatever the values. */
const operation = (sql: string) => /^\s*([A-Za-z]+)/.exec(sql)?.[1]?.toUpperCase() ?? 'SQL';

/**
 * `db` with a client span around each statement, on either engine (PGlite has no instrumentation
 * of its own, and one helper keeps both alike). The span holds the statement's text, whose values
 * are always parameters ($1…), never the values; `db` itself when tracing is off.
 */
export function withQuerySpans(db: Db): Db {
  if (!spansEnabled()) return db;
  const base = { 'db.system.name': 'postgresql', 'coffer.db.engine': db.kind };
  const traced = (q: Queryable): Queryable => ({
    query: <T>(sql: string, params?: unknown[]) =>
      inSpan(
        operation(sql),
        { ...base, 'db.operation.name': operation(sql), 'db.query.text': sql },
        () => q.query<T>(sql, params),
        { kind: 'client', requireParent: true },
      ),
    exec: (sql: string) =>
      inSpan('SQL script', { ...base, 'db.query.text': sql }, () => q.exec(sql), {
        kind: 'client',
        requireParent: true,
      }),
  });
  return {
    ...db,
    ...traced(db),
    tx: (work) => inSpan('transaction', base, () => db.tx((q) => work(traced(q))), { requireParent: true }),
  };
}
