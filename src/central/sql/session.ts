// The sessions and pools every SQL driver module provides (pg.ts, mysql.ts, sqlite.ts), and the bound
// they all put on a wait.
import type { Query } from './dialect.ts';

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
