// The I/O edge of the SQL lease store: a pool of sessions per driver, each running one statement at a
// time with bounded waits. The driver modules are loaded only when their driver is chosen.
import type { Query, SqlDriver } from './dialect.ts';

export interface SqlSession {
  query: Query;
  /** Returns the session; a session in doubt (`broken`) is discarded instead. */
  release(broken?: Error): void;
}

export interface SqlPool {
  /** A session of its own, waiting at most the timeout for one to be free. */
  connect(): Promise<SqlSession>;
  close(): Promise<void>;
}

export interface PoolOptions {
  dsn: string;
  /** Sessions at most (SQLite: always one). */
  maxConnections: number;
  /** Bound of every wait: connecting, checkout, statements, lock waits. */
  timeoutMs: number;
  /** An idle pooled connection failed (a server restart): reported, never fatal. */
  onIdleError?: (err: unknown) => void;
}

export async function openPool(driver: SqlDriver, options: PoolOptions): Promise<SqlPool> {
  switch (driver) {
    case 'postgres':
      return (await import('./pg.ts')).openPgPool(options);
    case 'mysql':
      return (await import('./mysql.ts')).openMysqlPool(options);
    case 'sqlite':
      return (await import('./sqlite.ts')).openSqlitePool(options);
  }
}

/**
 * `promise`, or a rejection naming `what` after `ms`; a value that arrives late is handed to `late`
 * (to give back a connection nobody waits for any more).
 */
export function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  what: string,
  late: (value: T) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      reject(new Error(`timeout after ${ms} ms ${what}`));
    }, ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        if (timedOut) late(value);
        else resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
