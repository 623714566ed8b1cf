// The SQL lease store on each driver against a real database (PostgreSQL, MariaDB, SQLite): the store
// conformance suite, the Go server's table created once by replicas starting together, the start-up
// schema check, a database the Go server wrote served with its holders and tokens (and written back so
// the Go server reads it), the upgrade of a Go table older than the version column, bounded waits,
// secret-free errors, the /readyz probe, and SQLite's single-replica guard.
import { afterAll, describe, expect, it } from 'vitest';
import { LeaseManager } from '../../../src/central/manager.ts';
import { startCentralServer } from '../../../src/central/server.ts';
import { SQL_DRIVERS, type SqlDriver, type SqlValue } from '../../../src/central/sql/dialect.ts';
import { SqlStore, type SqlStoreOptions } from '../../../src/central/sql/store.ts';
import { decodeInstant } from '../../../src/central/sql/values.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { centralTls } from '../../helpers/central-tls.ts';
import { eventually } from '../../helpers/eventually.ts';
import { runStoreConformance } from '../../unit/central/store-conformance.ts';
import { type IsolatedDatabase, sqlTestDatabase } from './sql-databases.ts';

const quiet = createLogger({ level: 'silent' });
const T0 = Date.UTC(2026, 8, 7, 9, 0, 0, 123);

/** The Go server's DDL per driver (its dialect.go), written here as the Go server would run it. */
const GO_DDL: Record<SqlDriver, string> = {
  postgres: `CREATE TABLE IF NOT EXISTS berth_leases (
	namespace text NOT NULL, name text NOT NULL, holder text NOT NULL, ttl_ms bigint NOT NULL,
	acquired_at timestamptz NOT NULL, renewed_at timestamptz NOT NULL, fencing_token integer NOT NULL,
	version bigint NOT NULL DEFAULT 1, PRIMARY KEY (namespace, name))`,
  mysql: `CREATE TABLE IF NOT EXISTS berth_leases (
	namespace varchar(253) NOT NULL, name varchar(253) NOT NULL, holder varchar(253) NOT NULL,
	ttl_ms bigint NOT NULL, acquired_at datetime(6) NOT NULL, renewed_at datetime(6) NOT NULL,
	fencing_token int NOT NULL, version bigint NOT NULL DEFAULT 1, PRIMARY KEY (namespace, name)) ENGINE=InnoDB`,
  sqlite: `CREATE TABLE IF NOT EXISTS berth_leases (
	namespace text NOT NULL, name text NOT NULL, holder text NOT NULL, ttl_ms integer NOT NULL,
	acquired_at text NOT NULL, renewed_at text NOT NULL, fencing_token integer NOT NULL,
	version integer NOT NULL DEFAULT 1, PRIMARY KEY (namespace, name))`,
};

/** The same table of a Go server before the version CAS (0.3.0): no version column. */
const goDdlBeforeVersion = (driver: SqlDriver): string =>
  GO_DDL[driver].replace(/,\s*version (bigint|integer) NOT NULL DEFAULT 1/, '');

/** An instant with microseconds as the Go server writes it per driver (µs after T0's milliseconds). */
function goTime(driver: SqlDriver, ms: number, micros = 456): string {
  const iso = new Date(ms).toISOString().replace('Z', `${String(micros).padStart(3, '0')}Z`);
  switch (driver) {
    case 'postgres':
      return iso.replace('T', ' ').replace('Z', '+00'); // pgx sends a timestamptz; its text form
    case 'mysql':
      return iso.replace('T', ' ').replace('Z', ''); // datetime(6), UTC (loc=UTC)
    case 'sqlite':
      return iso; // time.RFC3339Nano in UTC
  }
}

const ph = (driver: SqlDriver, n: number): string => (driver === 'postgres' ? `$${n}` : '?');
const placeholders = (driver: SqlDriver, count: number): string =>
  Array.from({ length: count }, (_, i) => ph(driver, i + 1)).join(', ');

/** The Go server's insert and update statements (insertSQL, updateSQL), with its parameter order. */
const goInsert = (driver: SqlDriver, row: SqlValue[]) =>
  [
    `INSERT INTO berth_leases (namespace, name, holder, ttl_ms, acquired_at, renewed_at, fencing_token, version) VALUES (${placeholders(driver, 7)}, 1)`,
    row,
  ] as const;
const goUpdate = (driver: SqlDriver, row: SqlValue[]) =>
  [
    `UPDATE berth_leases SET holder = ${ph(driver, 1)}, ttl_ms = ${ph(driver, 2)}, acquired_at = ${ph(driver, 3)}, renewed_at = ${ph(driver, 4)}, fencing_token = ${ph(driver, 5)}, version = version + 1 WHERE namespace = ${ph(driver, 6)} AND name = ${ph(driver, 7)} AND version = ${ph(driver, 8)}`,
    row,
  ] as const;

for (const driver of SQL_DRIVERS) {
  const result = await sqlTestDatabase(driver, `sql lease store (${driver})`);
  if (!result.ok) {
    describe.skip(`sql lease store (${driver}): ${result.reason}`, () => {
      it(`needs ${driver}`, () => {});
    });
    continue;
  }
  const db = result.db;
  afterAll(() => db.stop());
  const single = driver === 'sqlite';

  runStoreConformance(
    `sql ${driver}`,
    async () => {
      const d = await db.create();
      const open = () => SqlStore.open({ driver, dsn: d.dsn, logger: quiet });
      try {
        return { store: await open(), reopen: open, cleanup: d.drop };
      } catch (err) {
        await d.drop();
        throw err;
      }
    },
    { durable: true, singleReplica: single },
  );

  type Open = (extra?: Partial<SqlStoreOptions>) => Promise<SqlStore>;
  /** Runs `fn` with a fresh database, closing every store it opened and dropping the database after. */
  async function withDatabase(fn: (d: IsolatedDatabase, open: Open) => Promise<void>): Promise<void> {
    const d = await db.create();
    const stores: SqlStore[] = [];
    try {
      await fn(d, async (extra = {}) => {
        const store = await SqlStore.open({ driver, dsn: d.dsn, logger: quiet, ...extra });
        stores.push(store);
        return store;
      });
    } finally {
      for (const s of stores) await s.close();
      await d.drop();
    }
  }

  /** The table's columns as `name type`, in order, as the database itself reports them. */
  async function describeTable(d: IsolatedDatabase): Promise<string[]> {
    const rows =
      driver === 'postgres'
        ? await d.exec(`SELECT column_name AS n, data_type AS t FROM information_schema.columns
                         WHERE table_schema = current_schema() AND table_name = 'berth_leases' ORDER BY ordinal_position`)
        : driver === 'mysql'
          ? await d.exec(`SELECT COLUMN_NAME AS n, COLUMN_TYPE AS t FROM information_schema.COLUMNS
                           WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'berth_leases' ORDER BY ORDINAL_POSITION`)
          : await d.exec(`SELECT name AS n, type AS t FROM pragma_table_info('berth_leases') ORDER BY cid`);
    // MariaDB shows integer display widths (int(11)), MySQL 8 does not; SQLite upper-cases.
    return rows.map(
      (r) =>
        `${String(r.n)} ${String(r.t)
          .toLowerCase()
          .replace(/(int)\(\d+\)/, '$1')}`,
    );
  }

  const CREATED: Record<SqlDriver, string[]> = {
    postgres: [
      'namespace text',
      'name text',
      'holder text',
      'ttl_ms bigint',
      'acquired_at timestamp with time zone',
      'renewed_at timestamp with time zone',
      'fencing_token integer',
      'version bigint',
    ],
    mysql: [
      'namespace varchar(253)',
      'name varchar(253)',
      'holder varchar(253)',
      'ttl_ms bigint',
      'acquired_at datetime(6)',
      'renewed_at datetime(6)',
      'fencing_token int',
      'version bigint',
    ],
    sqlite: [
      'namespace text',
      'name text',
      'holder text',
      'ttl_ms integer',
      'acquired_at text',
      'renewed_at text',
      'fencing_token integer',
      'version integer',
    ],
  };

  describe(`sql lease store (${driver})`, () => {
    it(`creates the Go server's table${single ? '' : ', once when several replicas start together'} (--sql-migrate auto)`, async () => {
      await withDatabase(async (d, open) => {
        const stores = await Promise.all(Array.from({ length: single ? 1 : 6 }, () => open()));
        if (single) await stores[0]!.close();
        expect(await describeTable(d)).toEqual(CREATED[driver]);
        // off verifies the table auto created.
        await expect(open({ migrate: 'off' })).resolves.toBeInstanceOf(SqlStore);
      });
    });

    it('refuses to start with --sql-migrate off when the table is missing or differs, naming the column', async () => {
      await withDatabase(async (d, open) => {
        await expect(open({ migrate: 'off' })).rejects.toThrow(
          /does not match the lease schema: table berth_leases does not exist \(--sql-migrate off\)$/,
        );
        const mismatched: Record<SqlDriver, [ddl: string, expected: string]> = {
          postgres: [
            GO_DDL.postgres
              .replace('acquired_at timestamptz', 'acquired_at timestamp')
              .replace('version bigint', 'version integer'),
            'column acquired_at is timestamp without time zone, want timestamp with time zone; ' +
              'column version is integer, want bigint',
          ],
          mysql: [
            GO_DDL.mysql
              .replace('renewed_at datetime(6)', 'renewed_at datetime')
              .replace('holder varchar(253)', 'holder varchar(64)'),
            'column holder is varchar(64), want at least 253; column renewed_at is datetime(0), want datetime(3) or finer',
          ],
          sqlite: [
            GO_DDL.sqlite
              .replace('acquired_at text', 'acquired_at timestamp')
              .replace('ttl_ms integer NOT NULL', 'ttl_ms integer'),
            'column ttl_ms is nullable, want NOT NULL; column acquired_at is numeric, want text',
          ],
        };
        const [ddl, expected] = mismatched[driver];
        await d.exec(ddl);
        await expect(open({ migrate: 'off' })).rejects.toThrow(`${expected} (--sql-migrate off)`);
        // auto never alters an existing table beyond adding `version`: it refuses the same way.
        await expect(open({ migrate: 'auto' })).rejects.toThrow(expected);
      });
    });

    it('serves a database the Go server wrote, keeping holders, tokens and tombstones, and writes it back readable by Go', async () => {
      await withDatabase(async (d, open) => {
        await d.exec(GO_DDL[driver]);
        const t = (ms: number) => goTime(driver, ms);
        await d.exec(
          ...goInsert(driver, ['pipeline', 'ingest', 'cluster-east', 30_000, t(T0), t(T0 + 1_000), 7]),
        );
        await d.exec(...goInsert(driver, ['pipeline', 'released', 'cluster-east', 30_000, t(T0), t(T0), 4]));
        // The Go server's release: a tombstone (holder "", ttl 0, token and acquiredAt kept).
        await d.exec(...goUpdate(driver, ['', 0, t(T0), t(T0 + 2_000), 4, 'pipeline', 'released', 1]));
        await d.exec(
          ...goInsert(driver, [
            'pipeline',
            'expired',
            'cluster-west',
            10_000,
            t(T0 - 70_000),
            t(T0 - 60_000),
            2,
          ]),
        );

        const store = await open({ migrate: 'off' });
        // Microseconds are truncated to the millisecond, never rounded up.
        expect(await store.get({ namespace: 'pipeline', name: 'ingest' })).toEqual({
          key: { namespace: 'pipeline', name: 'ingest' },
          holder: 'cluster-east',
          ttlMs: 30_000,
          acquiredAt: T0,
          renewedAt: T0 + 1_000,
          fencingToken: 7,
          version: 1,
        });
        expect(await store.get({ namespace: 'pipeline', name: 'released' })).toMatchObject({
          holder: '',
          ttlMs: 0,
          fencingToken: 4,
          version: 2,
        });
        const clock = new ManualClock(T0 + 5_000);
        const manager = new LeaseManager({ store, clock });
        const key = (name: string) => ({ namespace: 'pipeline', name });
        expect(await manager.acquire(key('ingest'), 'cluster-west', 30_000)).toMatchObject({
          acquired: false,
          holder: 'cluster-east',
          fencingToken: 7,
        });
        expect(await manager.renew(key('ingest'), 'cluster-east', 7, 30_000)).toMatchObject({
          acquired: true,
          fencingToken: 7,
          acquiredAt: T0,
          expiresAt: T0 + 35_000,
        });
        expect(await manager.acquire(key('released'), 'cluster-west', 30_000)).toMatchObject({
          acquired: true,
          fencingToken: 5,
        });
        expect(await manager.acquire(key('expired'), 'cluster-east', 30_000)).toMatchObject({
          acquired: true,
          fencingToken: 3,
        });
        await store.close();

        // Back: the rows as the Go server's scanRecord reads them.
        const rows = await d.exec(
          'SELECT name, holder, ttl_ms, acquired_at, renewed_at, fencing_token, version FROM berth_leases ORDER BY name',
        );
        expect(
          rows.map((r) => [r.name, r.holder, Number(r.ttl_ms), Number(r.fencing_token), Number(r.version)]),
        ).toEqual([
          ['expired', 'cluster-east', 30_000, 3, 2],
          ['ingest', 'cluster-east', 30_000, 7, 2],
          ['released', 'cluster-west', 30_000, 5, 3],
        ]);
        for (const r of rows) expect(decodeInstant(r.renewed_at, 'renewed_at')).toBe(T0 + 5_000);
        if (driver === 'sqlite')
          // Go's parseTimeString: time.RFC3339Nano first.
          for (const r of rows)
            expect(String(r.renewed_at)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
        if (driver === 'mysql') expect(rows[1]!.renewed_at).toBe('2026-09-07 09:00:05.123000');
      });
    });

    it('adds the version column to a table of a Go server before the version CAS (auto); off names it', async () => {
      await withDatabase(async (d, open) => {
        await d.exec(goDdlBeforeVersion(driver));
        await d.exec(
          `INSERT INTO berth_leases (namespace, name, holder, ttl_ms, acquired_at, renewed_at, fencing_token) VALUES (${placeholders(driver, 7)})`,
          ['pipeline', 'ingest', 'cluster-east', 30_000, goTime(driver, T0), goTime(driver, T0), 3],
        );
        await expect(open({ migrate: 'off' })).rejects.toThrow(
          'table berth_leases does not match the lease schema: column version is missing (--sql-migrate off)',
        );
        const store = await open();
        expect(await store.get({ namespace: 'pipeline', name: 'ingest' })).toMatchObject({
          holder: 'cluster-east',
          fencingToken: 3,
          version: 1,
        });
        const manager = new LeaseManager({ store, clock: new ManualClock(T0 + 1_000) });
        expect(
          await manager.renew({ namespace: 'pipeline', name: 'ingest' }, 'cluster-east', 3, 30_000),
        ).toMatchObject({
          acquired: true,
        });
      });
    });

    if (driver !== 'sqlite') {
      it('bounds every wait: a locked table and an exhausted pool fail within the timeout', async () => {
        await withDatabase(async (d, open) => {
          const store = await open({ maxConnections: 1, timeoutMs: 300 });
          const key = { namespace: 'pipeline', name: 'ingest' };
          const unlock = await d.lockTable!();
          try {
            const started = performance.now();
            const [blocked, queued] = await Promise.allSettled([store.get(key), store.get(key)]);
            const elapsed = performance.now() - started;
            expect(blocked.status).toBe('rejected');
            expect(String((blocked as PromiseRejectedResult).reason)).toMatch(
              /lock timeout|statement timeout|Lock wait timeout/,
            );
            expect(queued.status).toBe('rejected');
            expect(String((queued as PromiseRejectedResult).reason)).toMatch(/timeout/);
            expect(elapsed).toBeLessThan(5_000);
          } finally {
            await unlock();
          }
          expect(await store.get(key)).toBeUndefined();
        });
      });

      it('keeps the password out of its errors', async () => {
        await withDatabase(async (d) => {
          const url = new URL(d.dsn);
          url.password = 'not-the-Secret-9431';
          const err = await SqlStore.open({
            driver,
            dsn: url.toString(),
            logger: quiet,
            timeoutMs: 2_000,
          }).catch((e: Error) => e);
          expect(String((err as Error).message)).toMatch(/password authentication failed|Access denied/);
          expect(String((err as Error).message)).not.toContain('not-the-Secret-9431');
          expect(String((err as Error).message)).toContain(`${driver} store ${url.username}@${url.host}`);
          url.port = '1';
          const refused = await SqlStore.open({ driver, dsn: url.toString(), logger: quiet }).catch(
            (e: Error) => e,
          );
          expect(String((refused as Error).message)).toMatch(/ECONNREFUSED/);
          expect(String((refused as Error).message)).not.toContain('not-the-Secret-9431');
        });
      });

      it('serves /readyz from a probe of the table', async () => {
        await withDatabase(async (d, open) => {
          const store = await open();
          const server = await startCentralServer({
            tls: await centralTls(),
            store,
            logger: quiet,
            gc: false,
            readiness: { ttlMs: 0 },
          });
          const ready = async () => (await fetch(`${server.url}/readyz`)).status;
          try {
            expect(await ready()).toBe(200);
            await d.exec('ALTER TABLE berth_leases RENAME TO berth_leases_away');
            await eventually(async () => (await ready()) === 503);
            await d.exec('ALTER TABLE berth_leases_away RENAME TO berth_leases');
            await eventually(async () => (await ready()) === 200);
          } finally {
            await server.stop();
          }
        });
      });
    }

    if (driver === 'postgres')
      it('stores instants exactly, whatever the session time zone', async () => {
        await withDatabase(async (d, open) => {
          const utc = await open();
          const kolkata = await open({ dsn: `${d.dsn}%20-c%20TimeZone%3DAsia%2FKolkata` });
          const key = { namespace: 'pipeline', name: 'ingest' };
          await new LeaseManager({ store: kolkata, clock: new ManualClock(T0) }).acquire(key, 'east', 30_000);
          expect(await utc.get(key)).toMatchObject({ acquiredAt: T0, renewedAt: T0, ttlMs: 30_000 });
          const row = await d.exec(
            `SELECT to_char(renewed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS') AS t FROM berth_leases`,
          );
          expect(row[0]!.t).toBe('2026-09-07T09:00:00.123');
        });
      });

    if (driver === 'mysql') {
      it("accepts the Go driver's DSN form and refuses a non-UTC loc before connecting", async () => {
        await withDatabase(async (d, open) => {
          const url = new URL(d.dsn);
          const goDsn = `${url.username}:${url.password}@tcp(${url.host})${url.pathname}?parseTime=true&loc=UTC&timeout=5s`;
          const store = await open({ dsn: goDsn });
          const key = { namespace: 'pipeline', name: 'ingest' };
          await new LeaseManager({ store, clock: new ManualClock(T0) }).acquire(key, 'east', 30_000);
          expect(await store.get(key)).toMatchObject({ holder: 'east', acquiredAt: T0, version: 1 });
          const err = await open({ dsn: `${goDsn.replace('loc=UTC', 'loc=Local')}` }).catch((e: Error) => e);
          expect((err as Error).message).toBe(
            `mysql store ${url.username}@${url.host}${url.pathname}: mysql dsn loc="Local" is not supported: lease timestamps are stored as zoneless datetime(6) and must round-trip in UTC; remove the loc parameter or set loc=UTC`,
          );
        });
      });
    }

    if (driver === 'sqlite') {
      it('serves one replica: a second store on the file is refused until the first closes; WAL is on', async () => {
        await withDatabase(async (d, open) => {
          const first = await open({ timeoutMs: 200 });
          await new LeaseManager({ store: first, clock: new ManualClock(T0) }).acquire(
            { namespace: 'pipeline', name: 'ingest' },
            'east',
            30_000,
          );
          await expect(open({ timeoutMs: 200 })).rejects.toThrow(
            `sqlite store ${d.dsn}: the database is locked by another process: SQLite serves a single central replica (stop the other one; several replicas need postgres or mysql)`,
          );
          await first.close();
          const second = await open();
          expect(await second.get({ namespace: 'pipeline', name: 'ingest' })).toMatchObject({
            holder: 'east',
          });
          await second.close();
          expect(await d.exec('PRAGMA journal_mode')).toEqual([{ journal_mode: 'wal' }]);
        });
      });
    }
  });
}
