// A real PostgreSQL for the tests: BERTH_TEST_PG_DSN when CI exported one (.ci/run starts it with
// .ci/postgres.sh), otherwise a throwaway cluster this file starts with the same script and stops
// afterwards. Only when neither works do the tests skip, saying why (console.warn).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describeDsn } from '../../../src/central/sql/dsn.ts';
import { databaseServer } from './db-server.ts';

export interface TestPostgres {
  dsn: string;
  /** A superuser-ish pool for test setup (schemas, locks, sabotage). */
  admin: pg.Pool;
  /** A new empty schema and a DSN whose search_path is it; `drop` removes it with everything in it. */
  createSchema(): Promise<{ name: string; dsn: string; drop(): Promise<void> }>;
  stop(): Promise<void>;
}

export type TestPostgresResult = { ok: true; pg: TestPostgres } | { ok: false; reason: string };

/** Connects to (or starts) PostgreSQL; on failure returns the reason and warns. */
export async function testPostgres(suite: string): Promise<TestPostgresResult> {
  const found = await databaseServer(
    {
      product: 'PostgreSQL',
      script: 'postgres.sh',
      dsnVar: 'BERTH_TEST_PG_DSN',
      dirVar: 'BERTH_TEST_PG_DIR',
      noInstallVar: 'BERTH_PG_NO_INSTALL',
    },
    suite,
  );
  if (!found.ok) return found;
  const { dsn, stop: stopServer } = found.server;
  const admin = new pg.Pool({ connectionString: dsn, max: 4, connectionTimeoutMillis: 10_000 });
  admin.on('error', () => undefined);
  try {
    await admin.query('SELECT 1');
  } catch (err) {
    await admin.end().catch(() => undefined);
    await stopServer();
    // With BERTH_TEST_PG_DSN set the database must work: fail loudly instead of skipping.
    throw new Error(`PostgreSQL at ${describeDsn('postgres', dsn)} is not usable: ${(err as Error).message}`);
  }
  const finalDsn = dsn;
  return {
    ok: true,
    pg: {
      dsn: finalDsn,
      admin,
      async createSchema() {
        const name = `berth_t_${randomBytes(6).toString('hex')}`;
        await admin.query(`CREATE SCHEMA ${name}`);
        return {
          name,
          dsn: `${finalDsn}?options=-c%20search_path%3D${name}`,
          drop: async () => {
            await admin.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`);
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
