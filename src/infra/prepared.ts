import type { PGlite } from '@electric-sql/pglite';
import { parse, protocol } from '@electric-sql/pglite';
import type pg from 'pg';

/** Distinct statement texts kept prepared (per connection); past it a text is parsed and planned each time. */
const MAX_PREPARED = 1000;
const statementNames = new Map<string, string>();
let named = 0;

/** A plan made before its tables changed shape (a restore): the statement is prepared anew. */
export function isStalePlan(error: unknown): boolean {
  const { code, message } = error as { code?: string; message?: string };
  return code === '0A000' && /cached plan/.test(message ?? '');
}

/**
 * A statement as node-postgres runs it prepared: each connection parses it once and PostgreSQL
 * keeps its plan (a generic one once that costs no more than planning each time), where an unnamed
 * statement is parsed and planned on every run.
 */
export function prepared(sql: string, params: unknown[] = []): pg.QueryConfig {
  let name = statementNames.get(sql);
  if (name === undefined && statementNames.size < MAX_PREPARED) {
    name = `coffer_${++named}`;
    statementNames.set(sql, name);
  }
  return { name, text: sql, values: params };
}

/** Whether `error` says the prepared `sql` has a stale plan; its name is then forgotten. */
export function forgetStale(sql: string, error: unknown): boolean {
  if (!isStalePlan(error)) return false;
  statementNames.delete(sql);
  return true;
}

type BackendMessage = Awaited<ReturnType<PGlite['execProtocolStream']>>[number];

interface Prepared {
  name: string;
  paramTypes: number[];
  /** The columns of its rows, as described once when prepared (none for a statement without rows). */
  columns: BackendMessage[];
}

/**
 * Runs statements on PGlite as named prepared statements. PGlite's own `query` parses, describes
 * and plans every statement anew in five calls into the database; here a statement is parsed and
 * described once, then each run is one call (bind, execute, sync), and PostgreSQL keeps its plan (a
 * generic one once it costs no more than planning each time). The rows' description is the one read
 * when the statement was prepared: a change of the result's shape fails the plan (isStalePlan), and
 * the statement is prepared and described again.
 * The caller holds PGlite's query lock (`_runExclusiveQuery`), as PGlite's own statements do.
 */
export class PgliteStatements {
  readonly #db: PGlite;
  readonly #prepared = new Map<string, Prepared>();
  #named = 0;

  constructor(db: PGlite) {
    this.#db = db;
  }

  /** Whether `sql` runs prepared (else through PGlite's `query`, past MAX_PREPARED texts). */
  accepts(sql: string): boolean {
    return this.#prepared.has(sql) || this.#prepared.size < MAX_PREPARED;
  }

  async run<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    const statement = this.#prepared.get(sql) ?? (await this.#prepare(sql));
    try {
      return await this.#execute<T>(statement, params);
    } catch (error) {
      if (!isStalePlan(error)) throw error;
      this.#prepared.delete(sql);
      return this.#execute<T>(await this.#prepare(sql), params);
    }
  }

  async #prepare(sql: string): Promise<Prepared> {
    const name = `coffer_${++this.#named}`;
    const messages = await this.#send([
      protocol.serialize.parse({ name, text: sql }),
      protocol.serialize.describe({ type: 'S', name }),
      protocol.serialize.sync(),
    ]);
    const prepared = {
      name,
      paramTypes: parse.parseDescribeStatementResults(messages),
      columns: messages.filter((message) => message.name === 'rowDescription'),
    };
    this.#prepared.set(sql, prepared);
    return prepared;
  }

  async #execute<T>(statement: Prepared, params: unknown[]): Promise<T[]> {
    const db = this.#db;
    const values = params.map((value, index) => {
      if (value === null || value === undefined) return null;
      const serialize = db.serializers[statement.paramTypes[index]!];
      return serialize ? serialize(value) : String(value);
    });
    const messages = await this.#send([
      protocol.serialize.bind({ statement: statement.name, values }),
      protocol.serialize.execute({}),
      protocol.serialize.sync(),
    ]);
    return (parse.parseResults([...statement.columns, ...messages], db.parsers)[0]?.rows ?? []) as T[];
  }

  /** One call into the database for all of `messages`; throws its error once the sync has run. */
  #send(messages: Uint8Array[]) {
    return this.#db.execProtocolStream(Buffer.concat(messages), { syncToFs: false });
  }
}
