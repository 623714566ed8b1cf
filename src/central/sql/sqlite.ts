// SQLite sessions through Node's built-in node:sqlite (synchronous DatabaseSync; loaded only for this
// driver, and on Node 22 it prints an ExperimentalWarning then, nothing is suppressed). One connection,
// handed to one transaction at a time: SQLite has a single writer, and interleaving two transactions'
// statements on one connection would nest them.
//
// Opening sets, in this order: busy_timeout (the timeout), locking_mode EXCLUSIVE, journal_mode WAL,
// synchronous FULL (a commit is on disk before the lease is granted: a token lost to a power cut could be
// granted again), then takes the write lock at once. In exclusive mode the lock is kept until close, so a
// second central on the same file (or any other process) is refused at its start instead of sharing the
// database: the single-replica guard. The OS drops the lock when the process dies.
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { Row, SqlValue } from './dialect.ts';
import { sqliteDsnConfig } from './dsn.ts';
import type { PoolOptions, SqlPool } from './session.ts';

const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;

export async function openSqlitePool(options: PoolOptions): Promise<SqlPool> {
  const config = sqliteDsnConfig(options.dsn);
  const { DatabaseSync } = await import('node:sqlite');
  const db = new DatabaseSync(config.location);
  try {
    db.exec(`PRAGMA busy_timeout = ${Math.round(options.timeoutMs)}`);
    db.exec('PRAGMA locking_mode = EXCLUSIVE');
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = FULL');
    db.exec('BEGIN IMMEDIATE');
    db.exec('COMMIT');
  } catch (err) {
    db.close();
    const code = (err as { errcode?: number }).errcode;
    if (code === SQLITE_BUSY || code === SQLITE_LOCKED)
      throw new Error(
        'the database is locked by another process: SQLite serves a single central replica ' +
          '(stop the other one; several replicas need postgres or mysql)',
      );
    throw err;
  }
  return new SqliteSessions(db, options.timeoutMs);
}

class SqliteSessions implements SqlPool {
  readonly #db: DatabaseSync;
  readonly #timeoutMs: number;
  readonly #statements = new Map<string, StatementSync>();
  #busy = false;
  readonly #waiting: Array<() => void> = [];

  constructor(db: DatabaseSync, timeoutMs: number) {
    this.#db = db;
    this.#timeoutMs = timeoutMs;
  }

  /** The connection for one transaction, after those queued before it (at most the timeout). */
  async connect() {
    await this.#acquire();
    let released = false;
    return {
      query: async (sql: string, params: readonly SqlValue[] = []) => this.#run(sql, params),
      release: () => {
        if (released) return;
        released = true;
        this.#release();
      },
    };
  }

  #run(sql: string, params: readonly SqlValue[]) {
    let statement = this.#statements.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    if (statement.columns().length > 0) return { rows: statement.all(...params) as Row[], affected: 0 };
    return { rows: [], affected: Number(statement.run(...params).changes) };
  }

  #acquire(): Promise<void> {
    if (!this.#busy) {
      this.#busy = true;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiting.splice(this.#waiting.indexOf(grant), 1);
        reject(new Error(`timeout after ${this.#timeoutMs} ms waiting for the connection`));
      }, this.#timeoutMs);
      this.#waiting.push(grant);
    });
  }

  #release(): void {
    const next = this.#waiting.shift();
    if (next === undefined) this.#busy = false;
    else next();
  }

  /** Closes after the transaction in progress, if any (waiting at most the timeout). */
  async close(): Promise<void> {
    await this.#acquire().catch(() => undefined);
    this.#db.close();
  }
}
