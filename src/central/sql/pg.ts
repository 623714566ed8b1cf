// PostgreSQL sessions through node-postgres. The pool bounds every wait: checking out a connection
// (connectionTimeoutMillis), each statement on the server (statement_timeout, lock_timeout), each query
// on the client (query_timeout, a second longer so the server's clearer error wins) and a transaction
// left idle (idle_in_transaction_session_timeout).
import pg from 'pg';
import { pgDsnConfig } from './dsn.ts';
import type { PoolOptions, SqlPool } from './session.ts';

export function openPgPool(options: PoolOptions): SqlPool {
  const { timeoutMs } = options;
  const pool = new pg.Pool({
    ...pgDsnConfig(options.dsn),
    max: options.maxConnections,
    connectionTimeoutMillis: timeoutMs,
    idleTimeoutMillis: 30_000,
    statement_timeout: timeoutMs,
    lock_timeout: timeoutMs,
    query_timeout: timeoutMs + 1_000,
    idle_in_transaction_session_timeout: 2 * timeoutMs,
    application_name: 'berth-central',
  });
  pool.on('error', (err) => options.onIdleError?.(err));
  return {
    async connect() {
      const client = await pool.connect();
      return {
        async query(sql, params = []) {
          const result = await client.query(sql, [...params]);
          return { rows: result.rows, affected: result.rowCount ?? 0 };
        },
        release: (broken) => client.release(broken),
      };
    },
    close: () => pool.end(),
  };
}
