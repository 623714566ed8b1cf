// A real MariaDB for the tests (`--sql-driver mysql`): BERTH_TEST_MYSQL_DSN when CI exported one (.ci/run
// starts it with .ci/mariadb.sh), otherwise a throwaway server this file starts with the same script and
// stops afterwards. Only when neither works do the tests skip, saying why (console.warn), as the
// PostgreSQL ones do (postgres.ts).
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { describeDsn } from '../../../src/central/sql/dsn.ts';
import { databaseServer } from './db-server.ts';

export interface TestMariaDB {
  /** mysql://berth:<pw>@127.0.0.1:<port>/berth */
  dsn: string;
  /** A pool with every privilege for test setup (databases, locks, sabotage). */
  admin: mysql.Pool;
  /** A new empty database and the DSN naming it; `drop` removes it. */
  createDatabase(): Promise<{ name: string; dsn: string; drop(): Promise<void> }>;
  stop(): Promise<void>;
}

export type TestMariaDBResult = { ok: true; db: TestMariaDB } | { ok: false; reason: string };

/** Connects to (or starts) MariaDB; on failure returns the reason and warns. */
export async function testMariaDB(suite: string): Promise<TestMariaDBResult> {
  const found = await databaseServer(
    {
      product: 'MariaDB',
      script: 'mariadb.sh',
      dsnVar: 'BERTH_TEST_MYSQL_DSN',
      dirVar: 'BERTH_TEST_MYSQL_DIR',
      noInstallVar: 'BERTH_MYSQL_NO_INSTALL',
    },
    suite,
  );
  if (!found.ok) return found;
  const { dsn, stop: stopServer } = found.server;
  const admin = mysql.createPool({ uri: dsn, connectionLimit: 4, connectTimeout: 10_000 });
  try {
    await admin.query('SELECT 1');
  } catch (err) {
    await admin.end().catch(() => undefined);
    await stopServer();
    // With BERTH_TEST_MYSQL_DSN set the database must work: fail loudly instead of skipping.
    throw new Error(`MariaDB at ${describeDsn('mysql', dsn)} is not usable: ${(err as Error).message}`);
  }
  const base = dsn;
  return {
    ok: true,
    db: {
      dsn: base,
      admin,
      async createDatabase() {
        const name = `berth_t_${randomBytes(6).toString('hex')}`;
        await admin.query(`CREATE DATABASE ${name}`);
        const url = new URL(base);
        url.pathname = `/${name}`;
        return {
          name,
          dsn: url.toString(),
          drop: async () => {
            await admin.query(`DROP DATABASE IF EXISTS ${name}`);
          },
        };
      },
      async stop() {
        await admin.end();
        await stopServer();
      },
    },
  };
}
