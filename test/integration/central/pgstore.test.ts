// The PostgreSQL lease store against a real PostgreSQL: the store conformance suite, migrations and the
// start-up schema check, bounded waits, secret-free errors and the /readyz probe.
import { afterAll, describe, expect, it } from 'vitest';
import { LeaseManager } from '../../../src/central/manager.ts';
import { PostgresStore } from '../../../src/central/postgres/store.ts';
import { startCentralServer } from '../../../src/central/server.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { eventually } from '../../helpers/eventually.ts';
import { runStoreConformance } from '../../unit/central/store-conformance.ts';
import { testPostgres } from './postgres.ts';

const result = await testPostgres('postgres lease store');

if (!result.ok) {
  describe.skip(`postgres lease store: ${result.reason}`, () => {
    it('needs PostgreSQL', () => {});
  });
} else {
  const db = result.pg;
  afterAll(() => db.stop());
  const quiet = createLogger({ level: 'silent' });

  runStoreConformance(
    'postgres',
    async () => {
      const schema = await db.createSchema();
      const open = () => PostgresStore.open({ dsn: db.dsn, schema: schema.name, logger: quiet });
      return { store: await open(), reopen: open, cleanup: schema.drop };
    },
    { durable: true },
  );

  /** Runs `fn` with a fresh schema, closing every store it opened and dropping the schema after. */
  async function withSchema(
    fn: (
      schema: string,
      open: (extra?: Partial<Parameters<typeof PostgresStore.open>[0]>) => Promise<PostgresStore>,
    ) => Promise<void>,
  ): Promise<void> {
    const schema = await db.createSchema();
    const stores: PostgresStore[] = [];
    try {
      await fn(schema.name, async (extra = {}) => {
        const store = await PostgresStore.open({ dsn: db.dsn, schema: schema.name, logger: quiet, ...extra });
        stores.push(store);
        return store;
      });
    } finally {
      for (const s of stores) await s.close();
      await schema.drop();
    }
  }

  const T0 = Date.UTC(2026, 8, 7, 9, 0, 0, 123);

  describe('postgres lease store', () => {
    it('creates the table once when several replicas start together (--sql-migrate auto)', async () => {
      await withSchema(async (schema, open) => {
        const stores = await Promise.all(Array.from({ length: 6 }, () => open()));
        expect(stores).toHaveLength(6);
        const cols = await db.admin.query<{ column_name: string; data_type: string }>(
          `SELECT column_name, data_type FROM information_schema.columns
            WHERE table_schema = $1 AND table_name = 'berth_leases' ORDER BY ordinal_position`,
          [schema],
        );
        expect(cols.rows.map((r) => `${r.column_name} ${r.data_type}`)).toEqual([
          'namespace text',
          'name text',
          'holder text',
          'ttl_ms bigint',
          'acquired_at timestamp with time zone',
          'renewed_at timestamp with time zone',
          'fencing_token integer',
          'version bigint',
        ]);
        // off verifies the table auto created.
        await expect(open({ migrate: 'off' })).resolves.toBeInstanceOf(PostgresStore);
      });
    });

    it('refuses to start with --sql-migrate off when the table is missing or differs, naming the mismatch', async () => {
      await withSchema(async (schema, open) => {
        await expect(open({ migrate: 'off' })).rejects.toThrow(
          /does not match the lease schema: table berth_leases does not exist \(--sql-migrate off\)$/,
        );
        await db.admin.query(`CREATE TABLE ${schema}.berth_leases (
          namespace text NOT NULL, name text NOT NULL, holder text NOT NULL, ttl_ms bigint NOT NULL,
          acquired_at timestamp NOT NULL, renewed_at timestamp NOT NULL, fencing_token integer NOT NULL,
          version integer NOT NULL DEFAULT 1, PRIMARY KEY (namespace))`);
        const expected =
          'column acquired_at is timestamp without time zone, want timestamp with time zone; ' +
          'column renewed_at is timestamp without time zone, want timestamp with time zone; ' +
          'column version is integer, want bigint; primary key is (namespace), want (namespace, name)';
        await expect(open({ migrate: 'off' })).rejects.toThrow(expected);
        // auto never alters an existing table: it refuses the same way.
        await expect(open({ migrate: 'auto' })).rejects.toThrow(expected);
      });
    });

    it('stores instants exactly, whatever the session time zone', async () => {
      await withSchema(async (schema, open) => {
        const utc = await open();
        const kolkata = await open({ dsn: `${db.dsn}?options=-c%20TimeZone%3DAsia%2FKolkata` });
        const key = { namespace: 'pipeline', name: 'ingest' };
        const manager = new LeaseManager({ store: kolkata, clock: new ManualClock(T0) });
        await manager.acquire(key, 'east', 30_000);
        expect(await utc.get(key)).toMatchObject({ acquiredAt: T0, renewedAt: T0, ttlMs: 30_000 });
        const row = await db.admin.query<{ t: string }>(
          `SELECT to_char(renewed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS') AS t FROM ${schema}.berth_leases`,
        );
        expect(row.rows[0]!.t).toBe('2026-09-07T09:00:00.123');
      });
    });

    it('bounds every wait: a locked table and an exhausted pool fail within the timeout', async () => {
      await withSchema(async (schema, open) => {
        const store = await open({ maxConnections: 1, timeoutMs: 300 });
        const key = { namespace: 'pipeline', name: 'ingest' };
        const locker = await db.admin.connect();
        try {
          await locker.query('BEGIN');
          await locker.query(`LOCK TABLE ${schema}.berth_leases IN ACCESS EXCLUSIVE MODE`);
          const started = performance.now();
          const [blocked, queued] = await Promise.allSettled([store.get(key), store.get(key)]);
          const elapsed = performance.now() - started;
          expect(blocked.status).toBe('rejected');
          expect(String((blocked as PromiseRejectedResult).reason)).toMatch(/lock timeout|statement timeout/);
          expect(queued.status).toBe('rejected');
          expect(String((queued as PromiseRejectedResult).reason)).toMatch(/timeout/);
          expect(elapsed).toBeLessThan(5_000);
        } finally {
          await locker.query('ROLLBACK');
          locker.release();
        }
        expect(await store.get(key)).toBeUndefined();
      });
    });

    it('keeps the password out of its errors', async () => {
      const url = new URL(db.dsn);
      url.password = 'not-the-Secret-9431';
      await expect(
        PostgresStore.open({ dsn: url.toString(), logger: quiet, timeoutMs: 2_000 }),
      ).rejects.toThrow(/password authentication failed/);
      const err = await PostgresStore.open({ dsn: url.toString(), logger: quiet }).catch((e: Error) => e);
      expect(String((err as Error).message)).not.toContain('not-the-Secret-9431');
      expect(String((err as Error).message)).toContain(`${url.username}@${url.host}`);
      url.port = '1';
      const refused = await PostgresStore.open({ dsn: url.toString(), logger: quiet }).catch((e: Error) => e);
      expect(String((refused as Error).message)).toMatch(/ECONNREFUSED/);
      expect(String((refused as Error).message)).not.toContain('not-the-Secret-9431');
    });

    it('serves /readyz from a probe of the table', async () => {
      await withSchema(async (schema, open) => {
        const store = await open();
        const server = await startCentralServer({ store, logger: quiet, gc: false, readiness: { ttlMs: 0 } });
        const ready = async () => (await fetch(`${server.url}/readyz`)).status;
        try {
          expect(await ready()).toBe(200);
          await db.admin.query(`ALTER TABLE ${schema}.berth_leases RENAME TO berth_leases_away`);
          await eventually(async () => (await ready()) === 503);
          await db.admin.query(`ALTER TABLE ${schema}.berth_leases_away RENAME TO berth_leases`);
          await eventually(async () => (await ready()) === 200);
        } finally {
          await server.stop();
        }
      });
    });
  });
}
