// The SQL lease Store (`--store-backend sql`, one implementation over PostgreSQL, MySQL/MariaDB and
// SQLite; docs/central-stores.md): one row per key in berth_leases, every operation in an explicit
// transaction, the compare-and-swap on `version` done by the database in the statement that writes
// (UPDATE ... WHERE version = expected; an INSERT that cannot overwrite), so any number of central
// replicas can share one PostgreSQL or MySQL database. Rows are never deleted: a released or collected
// lease is a tombstone row that keeps its fencing token. The table is the Go server's, so either server
// can serve a database the other wrote.
//
// Which clock decides expiry: the central replica's clock (the lease manager's injected Clock), never
// the database's. This module only stores and returns the instants it is given; no statement reads
// now()/CURRENT_TIMESTAMP and no column has a time default. Why:
//  - Safety never depends on a clock: "at most one holder" comes from the CAS on `version`, which the
//    database enforces. Clocks only decide *when* a lease counts as expired.
//  - One pure rule, `isExpired(record, now)`, serves acquire, renew and the TTL collector for every
//    backend. Letting SQL judge expiry with now() in some paths while the manager judges with its clock
//    in others would compare instants from two clocks — the mixing behind the Go server's early
//    expiries (#191) — and PostgreSQL's now() is the *transaction start*, not the statement time.
//  - The instants we store (acquiredAt, renewedAt) and the expiresAt we answer come from the same clock
//    that later judges them, so a holder is told exactly the instant the server will use.
//  - The Kubernetes backend has no server clock at all (Lease times are client-written), so the rule is
//    the same for every store, and expiry stays testable with a ManualClock.
// Consequence: replicas behind one database must keep their clocks in sync (NTP), as with the Go
// server; a replica running δ ahead reclaims an expired lease δ early, which the holder's heartbeat
// margin (heartbeat ≪ TTL) must cover.
import type { Logger } from '../../observability/logger.ts';
import { cloneRecord, type LeaseKey, type LeaseRecord } from '../record.ts';
import { type Store, StoreConflictError } from '../store.ts';
import { openPool } from './connection.ts';
import { type Dialect, dialectFor, type Query, type Row, type SqlDriver } from './dialect.ts';
import { describeDsn, dsnPassword } from './dsn.ts';
import { schemaMismatches, TABLE, type TableInfo } from './schema.ts';
import type { SqlPool } from './session.ts';
import { decodeInstant, decodeInteger, decodeText, MAX_INSTANT_MS } from './values.ts';

export type MigrateMode = 'auto' | 'off';
export const MIGRATE_MODES: readonly MigrateMode[] = ['auto', 'off'];

export const DEFAULT_POOL_MAX = 10;
export const DEFAULT_SQL_TIMEOUT_MS = 5_000;
/** Runs of a transaction the database rolled back on its own (deadlock, serialization failure). */
const MAX_ATTEMPTS = 3;

export interface SqlStoreOptions {
  driver: SqlDriver;
  /** The driver's connection string (src/central/sql/dsn.ts lists the forms). */
  dsn: string;
  /** auto: create the table if absent, add `version` to a pre-0.3.1 Go table, then verify; off: only verify. */
  migrate?: MigrateMode;
  /** Pool size (default 10); SQLite always uses one connection. */
  maxConnections?: number;
  /** Bound of every wait (default 5 s): connecting, checkout, statements, lock waits. */
  timeoutMs?: number;
  logger?: Logger;
}

/** The store could not be opened: a bad DSN, an unreachable database, or a table that does not match (named). */
export class SqlStoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SqlStoreError';
  }
}

function checkRecord(record: LeaseRecord): void {
  for (const [field, value, max] of [
    ['ttlMs', record.ttlMs, Number.MAX_SAFE_INTEGER],
    ['fencingToken', record.fencingToken, Number.MAX_SAFE_INTEGER],
    ['acquiredAt', record.acquiredAt, MAX_INSTANT_MS],
    ['renewedAt', record.renewedAt, MAX_INSTANT_MS],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 0 || value > max)
      throw new Error(`sql store: ${field} must be an integer from 0 to ${max}, got ${value}`);
  }
}

function fromRow(row: Row): LeaseRecord {
  return {
    key: { namespace: decodeText(row.namespace, 'namespace'), name: decodeText(row.name, 'name') },
    holder: decodeText(row.holder, 'holder'),
    ttlMs: decodeInteger(row.ttl_ms, 'ttl_ms'),
    acquiredAt: decodeInstant(row.acquired_at, 'acquired_at'),
    renewedAt: decodeInstant(row.renewed_at, 'renewed_at'),
    fencingToken: decodeInteger(row.fencing_token, 'fencing_token'),
    version: decodeInteger(row.version, 'version'),
  };
}

/** Replaces the DSN's password wherever it appears (driver messages may echo connection details). */
const scrubber =
  (password: string | undefined) =>
  (text: string): string =>
    password ? text.replaceAll(password, '***') : text;

function messageOf(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) return err.errors.map(messageOf).join('; ');
  return err instanceof Error ? err.message || err.name : String(err);
}

export class SqlStore implements Store {
  /** The metrics label, as the Go server's (`--store-backend` value). */
  readonly backend = 'sql';
  readonly driver: SqlDriver;
  readonly #dialect: Dialect;
  readonly #pool: SqlPool;
  readonly #scrub: (text: string) => string;
  #closed: Promise<void> | undefined;

  private constructor(dialect: Dialect, pool: SqlPool, scrub: (text: string) => string) {
    this.driver = dialect.driver;
    this.#dialect = dialect;
    this.#pool = pool;
    this.#scrub = scrub;
  }

  /** Connects, migrates (auto) and verifies the table; rejects with SqlStoreError naming the problem. */
  static async open(options: SqlStoreOptions): Promise<SqlStore> {
    const { driver, dsn, logger } = options;
    const migrate = options.migrate ?? 'auto';
    const where = describeDsn(driver, dsn);
    const scrub = scrubber(dsnPassword(driver, dsn));
    const fail = (detail: string): SqlStoreError => new SqlStoreError(`${driver} store ${where}: ${detail}`);
    let pool: SqlPool;
    try {
      pool = await openPool(driver, {
        dsn,
        maxConnections: options.maxConnections ?? DEFAULT_POOL_MAX,
        timeoutMs: options.timeoutMs ?? DEFAULT_SQL_TIMEOUT_MS,
        onIdleError: (err) =>
          logger?.warn({ err: scrub(messageOf(err)) }, `${driver} store: idle connection failed`),
      });
    } catch (err) {
      throw fail(scrub(messageOf(err)));
    }
    const store = new SqlStore(dialectFor(driver), pool, scrub);
    try {
      if (migrate === 'auto') await store.#migrate();
      const problems = schemaMismatches(store.#dialect.expected, await store.#introspect());
      if (problems.length > 0)
        throw fail(
          `table ${TABLE} does not match the lease schema: ${problems.join('; ')}` +
            (migrate === 'off' ? ' (--sql-migrate off)' : ''),
        );
    } catch (err) {
      await pool.close().catch(() => undefined);
      if (err instanceof SqlStoreError) throw err;
      throw fail(scrub(messageOf(err)));
    }
    logger?.info({ driver, database: where, table: TABLE }, 'sql lease store ready');
    return store;
  }

  async #migrate(): Promise<void> {
    const d = this.#dialect;
    await this.#transaction(false, async (q) => {
      if (d.migrationLock !== undefined) await q(d.migrationLock);
      await q(d.createTable);
    });
    const hasVersion = (t: TableInfo): boolean => t.columns.some((c) => c.name === 'version');
    const before = await this.#introspect();
    if (before.columns.length === 0 || hasVersion(before)) return;
    try {
      await this.#transaction(false, (q) => q(d.addVersion));
    } catch (err) {
      // Another replica may have added it first.
      if (!hasVersion(await this.#introspect())) throw err;
    }
  }

  #introspect(): Promise<TableInfo> {
    return this.#transaction(true, (q) => this.#dialect.introspect(q));
  }

  /**
   * Runs `fn` in a transaction on a session of its own, again (up to MAX_ATTEMPTS) when the database
   * rolled it back on its own; a session whose rollback fails is discarded. Rejects with the driver's
   * error, for `#call` to classify.
   */
  async #transaction<T>(readOnly: boolean, fn: (q: Query) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (this.#closed !== undefined) throw new Error('closed');
      const session = await this.#pool.connect();
      let broken: Error | undefined;
      try {
        await session.query(this.#dialect.begin(readOnly));
        const result = await fn(session.query);
        await session.query('COMMIT');
        return result;
      } catch (err) {
        try {
          await session.query('ROLLBACK');
        } catch (rollbackErr) {
          broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
        }
        if (attempt < MAX_ATTEMPTS && this.#dialect.isRetryable(err)) continue;
        throw err;
      } finally {
        session.release(broken);
      }
    }
  }

  /** A store operation: driver errors become one password-free line naming the driver. */
  async #call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof StoreConflictError) throw err;
      throw new Error(`${this.driver} store: ${this.#scrub(messageOf(err))}`);
    }
  }

  async ping(): Promise<void> {
    return this.#call(async () => {
      await this.#transaction(true, (q) => q(this.#dialect.ping));
    });
  }

  async get(key: LeaseKey): Promise<LeaseRecord | undefined> {
    return this.#call(async () => {
      const { rows } = await this.#transaction(true, (q) =>
        q(this.#dialect.selectOne, [key.namespace, key.name]),
      );
      return rows[0] === undefined ? undefined : fromRow(rows[0]);
    });
  }

  async list(): Promise<LeaseRecord[]> {
    return this.#call(async () => {
      const { rows } = await this.#transaction(true, (q) => q(this.#dialect.selectAll));
      return rows.map(fromRow);
    });
  }

  async put(expectedVersion: number, record: LeaseRecord): Promise<LeaseRecord> {
    checkRecord(record);
    const d = this.#dialect;
    const { namespace, name } = record.key;
    const values = [
      record.holder,
      record.ttlMs,
      d.encodeInstant(record.acquiredAt),
      d.encodeInstant(record.renewedAt),
      record.fencingToken,
      namespace,
      name,
    ];
    const conflict = (): StoreConflictError =>
      new StoreConflictError(
        expectedVersion === 0
          ? `lease store: ${namespace}/${name} already exists`
          : `lease store: ${namespace}/${name} is not at version ${expectedVersion}`,
      );
    return this.#call(async () => {
      let affected: number;
      try {
        ({ affected } = await this.#transaction(false, (q) =>
          expectedVersion === 0 ? q(d.insert, values) : q(d.update, [...values, expectedVersion]),
        ));
      } catch (err) {
        if (d.isDuplicateKey(err)) throw conflict();
        throw err;
      }
      if (affected !== 1) throw conflict();
      return cloneRecord({ ...record, version: expectedVersion + 1 });
    });
  }

  close(): Promise<void> {
    this.#closed ??= this.#pool.close();
    return this.#closed;
  }
}
