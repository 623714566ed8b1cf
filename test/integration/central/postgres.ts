// A real PostgreSQL for the tests: BERTH_TEST_PG_DSN when CI exported one (.ci/run starts it with
// .ci/postgres.sh), otherwise a throwaway cluster this file starts with the same script and stops
// afterwards. Only when neither works do the tests skip, saying why (console.warn).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import pg from 'pg';
import { redactDsn } from '../../../src/central/postgres/dsn.ts';

export interface TestPostgres {
  dsn: string;
  /** A superuser-ish pool for test setup (schemas, locks, sabotage). */
  admin: pg.Pool;
  /** A new empty schema; `drop` removes it with everything in it. */
  createSchema(): Promise<{ name: string; drop(): Promise<void> }>;
  stop(): Promise<void>;
}

export type TestPostgresResult = { ok: true; pg: TestPostgres } | { ok: false; reason: string };

const SCRIPT = join(process.cwd(), '.ci/postgres.sh');

function run(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', [SCRIPT, ...args], { env, timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

async function startOwn(): Promise<{ dsn: string; stop: () => Promise<void> } | string> {
  const started = await run(['start'], { ...process.env, BERTH_PG_NO_INSTALL: '1' });
  const dsn = /export BERTH_TEST_PG_DSN='([^']*)'/.exec(started.stdout)?.[1];
  const dir = /export BERTH_TEST_PG_DIR='([^']*)'/.exec(started.stdout)?.[1];
  if (started.code !== 0 || dsn === undefined || dir === undefined)
    return `.ci/postgres.sh start failed (exit ${started.code}): ${started.stderr.trim().split('\n').slice(-3).join(' | ')}`;
  return {
    dsn,
    stop: async () => {
      await run(['stop', dir], process.env);
    },
  };
}

/** Connects to (or starts) PostgreSQL; on failure returns the reason and warns. */
export async function testPostgres(suite: string): Promise<TestPostgresResult> {
  let dsn = process.env.BERTH_TEST_PG_DSN;
  let stopServer = async (): Promise<void> => {};
  if (dsn === undefined || dsn === '') {
    const own = await startOwn();
    if (typeof own === 'string') {
      const reason = `BERTH_TEST_PG_DSN is unset and PostgreSQL could not be started: ${own}`;
      console.warn(`SKIP ${suite}: ${reason}`);
      return { ok: false, reason };
    }
    dsn = own.dsn;
    stopServer = own.stop;
  }
  const admin = new pg.Pool({ connectionString: dsn, max: 4, connectionTimeoutMillis: 10_000 });
  admin.on('error', () => undefined);
  try {
    await admin.query('SELECT 1');
  } catch (err) {
    await admin.end().catch(() => undefined);
    await stopServer();
    // With BERTH_TEST_PG_DSN set the database must work: fail loudly instead of skipping.
    throw new Error(`PostgreSQL at ${redactDsn(dsn)} is not usable: ${(err as Error).message}`);
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
