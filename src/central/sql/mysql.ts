// MySQL / MariaDB sessions through mysql2. Every session runs READ COMMITTED (as the Go server: no gap
// locks, so concurrent creates of one key conflict instead of deadlocking), strict (a bad value is an
// error, never silently truncated), and with lock waits bounded by the timeout (whole seconds, at least
// one). Datetimes come back as text (dateStrings) and are read as UTC by the store; bigints come back
// as text, never as rounded numbers. Checkout and each query are bounded on the client as well.
import mysql from 'mysql2/promise';
import type { Row } from './dialect.ts';
import { mysqlDsnConfig } from './dsn.ts';
import { type PoolOptions, type SqlPool, withTimeout } from './session.ts';

export function openMysqlPool(options: PoolOptions): SqlPool {
  const { timeoutMs } = options;
  const pool = mysql.createPool({
    ...mysqlDsnConfig(options.dsn),
    connectionLimit: options.maxConnections,
    maxIdle: options.maxConnections,
    idleTimeout: 30_000,
    connectTimeout: timeoutMs,
    waitForConnections: true,
    enableKeepAlive: true,
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
    charset: 'utf8mb4',
  });
  const lockWaitSeconds = Math.max(1, Math.ceil(timeoutMs / 1_000));
  const setUp = new WeakSet<object>();
  return {
    async connect() {
      const acquiring = pool.getConnection();
      const conn = await withTimeout(acquiring, timeoutMs, 'waiting for a connection', (late) =>
        late.release(),
      );
      if (!setUp.has(conn.connection)) {
        try {
          await conn.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
          await conn.query(
            `SET SESSION innodb_lock_wait_timeout = ${lockWaitSeconds}, lock_wait_timeout = ${lockWaitSeconds},
                 sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'STRICT_ALL_TABLES')`,
          );
        } catch (err) {
          conn.destroy();
          throw err;
        }
        setUp.add(conn.connection);
      }
      return {
        async query(sql, params = []) {
          const [result] = await conn.query({ sql, values: [...params], timeout: timeoutMs + 1_000 });
          return Array.isArray(result)
            ? { rows: result as Row[], affected: 0 }
            : { rows: [], affected: result.affectedRows };
        },
        release: (broken) => (broken ? conn.destroy() : conn.release()),
      };
    },
    close: () => pool.end(),
  };
}
