// PostgreSQL lease Store (`--store-backend postgres`, reference/berth-spec.md §3.8): one row per key in
// berth_leases, every operation in an explicit transaction, the compare-and-swap on `version` done by the
// database in the same statement that writes (UPDATE ... WHERE version = $expected / INSERT ... ON
// CONFLICT DO NOTHING), so any number of central replicas can share one database. Rows are never
// deleted: a released or collected lease is a tombstone row that keeps its fencing token.
//
// Which clock decides expiry: the central replica's clock (the lease manager's injected Clock), never
// the database's. This module only stores and returns the instants it is given; no statement reads
// now()/CURRENT_TIMESTAMP and no column has a time default. Why:
//  - Safety never depends on a clock: "at most one holder" comes from the CAS on `version`, which the
//    database enforces. Clocks only decide *when* a lease counts as expired.
//  - One pure rule, `isExpired(record, now)`, serves acquire, renew and the TTL collector for every
//    backend. Letting SQL judge expiry with now() in some paths while the manager judges with its clock
//    in others would compare instants from two clocks — the mixing that caused the Go server's early
//    expiries (#191) — and PostgreSQL's now() is the *transaction start*, not the statement time.
//  - The instants we store (acquiredAt, renewedAt) and the expiresAt we answer come from the same clock
//    that later judges them, so a holder is told exactly the instant the server will use.
//  - The Kubernetes backend has no server clock at all (Lease times are client-written), so the rule is
//    the same for every store, and expiry stays testable with a ManualClock.
// Consequence: replicas behind one database must keep their clocks in sync (NTP), as with the Go
// server; a replica running δ ahead reclaims an expired lease δ early, which the holder's heartbeat
// margin (heartbeat ≪ TTL) must cover.
//
// The pool bounds every wait: checking out a connection (connectionTimeoutMillis), each statement on
// the server (statement_timeout, lock_timeout), each query on the client (query_timeout), and a
// transaction left idle (idle_in_transaction_session_timeout). The DSN's password never reaches a
// log or an error message.
import pg from 'pg';
import type { Logger } from '../../observability/logger.ts';
import { cloneRecord, type LeaseKey, type LeaseRecord } from '../record.ts';
import { type Store, StoreConflictError } from '../store.ts';
import { describeDsn, dsnConfig } from './dsn.ts';
import { type ColumnInfo, createTableSql, qualifiedTable, schemaMismatches, TABLE } from './schema.ts';

export type MigrateMode = 'auto' | 'off';
export const MIGRATE_MODES: readonly MigrateMode[] = ['auto', 'off'];

export const DEFAULT_POOL_MAX = 10;
export const DEFAULT_SQL_TIMEOUT_MS = 5_000;

export interface PostgresStoreOptions {
  /** libpq connection string (URL or key=value). */
  dsn: string;
  /** auto: create the table if absent (then verify); off: only verify. Default auto. */
  migrate?: MigrateMode;
  /** Schema holding berth_leases; default: the connection's current schema (search_path). */
  schema?: string;
  /** Pool size (default 10). */
  maxConnections?: number;
  /**
   * Bound of every wait (default 5 s): connection checkout, statement and lock timeouts on the server;
   * the client-side query timeout is one second longer so the server's cleaner error wins.
   */
  timeoutMs?: number;
  logger?: Logger;
}

/** The store could not be opened: unreachable database, or a table that does not match (named). */
export class PostgresStoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PostgresStoreError';
  }
}

interface LeaseRow {
  namespace: string;
  name: string;
  holder: string;
  ttl_ms: string;
  acquired_at: Date;
  renewed_at: Date;
  fencing_token: number;
  version: string;
}

const COLUMNS = 'namespace, name, holder, ttl_ms, acquired_at, renewed_at, fencing_token, version';

function int(text: string | number, column: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new Error(`postgres store: ${column} ${String(text)} is out of range`);
  return n;
}

function fromRow(row: LeaseRow): LeaseRecord {
  return {
    key: { namespace: row.namespace, name: row.name },
    holder: row.holder,
    ttlMs: int(row.ttl_ms, 'ttl_ms'),
    acquiredAt: row.acquired_at.getTime(),
    renewedAt: row.renewed_at.getTime(),
    fencingToken: row.fencing_token,
    version: int(row.version, 'version'),
  };
}

// Instants go over the wire as explicit UTC text: no dependence on the session's TimeZone.
const instant = (ms: number): string => new Date(ms).toISOString();

function checkRecord(record: LeaseRecord): void {
  for (const [field, value] of [
    ['ttlMs', record.ttlMs],
    ['acquiredAt', record.acquiredAt],
    ['renewedAt', record.renewedAt],
    ['fencingToken', record.fencingToken],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 0)
      throw new Error(`postgres store: ${field} must be a non-negative integer, got ${value}`);
  }
}

/** Replaces the DSN's password wherever it appears (driver messages may echo connection details). */
function scrubber(dsn: string): (text: string) => string {
  let password: string | undefined;
  try {
    const parsed = new URL(dsn.trim());
    password = parsed.password ? decodeURIComponent(parsed.password) : undefined;
  } catch {
    password = /\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S+)/i.exec(dsn)?.[1]?.replace(/^'|'$/g, '');
  }
  return (text) => (password ? text.replaceAll(password, '***') : text);
}

export class PostgresStore implements Store {
  readonly backend = 'postgres';
  readonly #pool: pg.Pool;
  readonly #table: string;
  readonly #schema: string | undefined;
  readonly #scrub: (text: string) => string;
  #closed: Promise<void> | undefined;

  private constructor(pool: pg.Pool, schema: string | undefined, scrub: (text: string) => string) {
    this.#pool = pool;
    this.#schema = schema;
    this.#table = qualifiedTable(schema);
    this.#scrub = scrub;
  }

  /** Connects, creates (auto) and verifies the table; rejects with PostgresStoreError naming the problem. */
  static async open(options: PostgresStoreOptions): Promise<PostgresStore> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_SQL_TIMEOUT_MS;
    const scrub = scrubber(options.dsn);
    const where = describeDsn(options.dsn);
    let pool: pg.Pool;
    try {
      pool = new pg.Pool({
        ...dsnConfig(options.dsn),
        max: options.maxConnections ?? DEFAULT_POOL_MAX,
        connectionTimeoutMillis: timeoutMs,
        idleTimeoutMillis: 30_000,
        statement_timeout: timeoutMs,
        lock_timeout: timeoutMs,
        query_timeout: timeoutMs + 1_000,
        idle_in_transaction_session_timeout: 2 * timeoutMs,
        application_name: 'berth-central',
      });
    } catch (err) {
      throw new PostgresStoreError(`postgres store ${where}: ${scrub(messageOf(err))}`);
    }
    // An idle pooled connection that dies (server restart) must not crash the process.
    pool.on('error', (err) =>
      options.logger?.warn({ err: scrub(messageOf(err)) }, 'postgres store: idle connection failed'),
    );
    const store = new PostgresStore(pool, options.schema, scrub);
    try {
      if ((options.migrate ?? 'auto') === 'auto') await store.#migrate();
      const problems = await store.#verify();
      if (problems.length > 0)
        throw new PostgresStoreError(
          `postgres store ${where}: table ${store.#table} does not match the lease schema: ${problems.join('; ')}` +
            ((options.migrate ?? 'auto') === 'off' ? ' (--sql-migrate off)' : ''),
        );
    } catch (err) {
      await pool.end().catch(() => undefined);
      if (err instanceof PostgresStoreError) throw err;
      throw new PostgresStoreError(
        `postgres store ${where}: ${scrub(messageOf(err)).replace(/^postgres store: /, '')}`,
      );
    }
    options.logger?.info({ database: where, table: store.#table }, 'postgres lease store ready');
    return store;
  }

  async #migrate(): Promise<void> {
    // Replicas starting together would race on CREATE TABLE IF NOT EXISTS (duplicate pg_type rows):
    // serialise them on a transaction-scoped advisory lock.
    await this.#tx(false, async (c) => {
      await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`berth-migrate:${this.#table}`]);
      await c.query(createTableSql(this.#schema));
    });
  }

  async #verify(): Promise<string[]> {
    return this.#tx(true, async (c) => {
      const schema = await c.query<{ s: string }>('SELECT coalesce($1::text, current_schema()) AS s', [
        this.#schema ?? null,
      ]);
      const s = schema.rows[0]!.s;
      const columns = await c.query<ColumnInfo & { column_default: string | null }>(
        `SELECT column_name, data_type, is_nullable, character_maximum_length, column_default
           FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2`,
        [s, TABLE],
      );
      const pk = await c.query<{ column_name: string }>(
        `SELECT k.column_name
           FROM information_schema.table_constraints t
           JOIN information_schema.key_column_usage k
             ON k.constraint_schema = t.constraint_schema AND k.constraint_name = t.constraint_name
            AND k.table_name = t.table_name
          WHERE t.table_schema = $1 AND t.table_name = $2 AND t.constraint_type = 'PRIMARY KEY'
          ORDER BY k.ordinal_position`,
        [s, TABLE],
      );
      const withDefaults = new Set(
        columns.rows.filter((r) => r.column_default !== null).map((r) => r.column_name),
      );
      return schemaMismatches(
        columns.rows,
        pk.rows.map((r) => r.column_name),
        withDefaults,
      );
    });
  }

  /** Runs `fn` in a transaction on one pooled connection; a connection in doubt is discarded. */
  async #tx<T>(readOnly: boolean, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    if (this.#closed !== undefined) throw new Error('postgres store: closed');
    const client = await this.#pool.connect();
    let broken: Error | undefined;
    try {
      await client.query(readOnly ? 'BEGIN READ ONLY' : 'BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch (rollbackErr) {
        broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
      }
      throw new Error(`postgres store: ${this.#scrub(messageOf(err))}`);
    } finally {
      client.release(broken);
    }
  }

  async ping(): Promise<void> {
    // Through the table, so a missing table or privilege fails readiness, not just a dead server.
    await this.#tx(true, (c) => c.query(`SELECT 1 FROM ${this.#table} LIMIT 1`));
  }

  async get(key: LeaseKey): Promise<LeaseRecord | undefined> {
    const rows = await this.#tx(true, async (c) => {
      const r = await c.query<LeaseRow>(
        `SELECT ${COLUMNS} FROM ${this.#table} WHERE namespace = $1 AND name = $2`,
        [key.namespace, key.name],
      );
      return r.rows;
    });
    return rows[0] === undefined ? undefined : fromRow(rows[0]);
  }

  async list(): Promise<LeaseRecord[]> {
    const rows = await this.#tx(
      true,
      async (c) => (await c.query<LeaseRow>(`SELECT ${COLUMNS} FROM ${this.#table}`)).rows,
    );
    return rows.map(fromRow);
  }

  async put(expectedVersion: number, record: LeaseRecord): Promise<LeaseRecord> {
    checkRecord(record);
    const { namespace, name } = record.key;
    const values = [
      namespace,
      name,
      record.holder,
      record.ttlMs,
      instant(record.acquiredAt),
      instant(record.renewedAt),
      record.fencingToken,
    ];
    const rows = await this.#tx(false, async (c) => {
      const r =
        expectedVersion === 0
          ? await c.query<LeaseRow>(
              `INSERT INTO ${this.#table} (${COLUMNS})
               VALUES ($1, $2, $3, $4, $5, $6, $7, 1)
               ON CONFLICT (namespace, name) DO NOTHING
               RETURNING ${COLUMNS}`,
              values,
            )
          : await c.query<LeaseRow>(
              `UPDATE ${this.#table}
                  SET holder = $3, ttl_ms = $4, acquired_at = $5, renewed_at = $6, fencing_token = $7,
                      version = version + 1
                WHERE namespace = $1 AND name = $2 AND version = $8
               RETURNING ${COLUMNS}`,
              [...values, expectedVersion],
            );
      return r.rows;
    });
    if (rows[0] === undefined)
      throw new StoreConflictError(
        expectedVersion === 0
          ? `lease store: ${namespace}/${name} already exists`
          : `lease store: ${namespace}/${name} is not at version ${expectedVersion}`,
      );
    return cloneRecord(fromRow(rows[0]));
  }

  close(): Promise<void> {
    this.#closed ??= this.#pool.end();
    return this.#closed;
  }
}

function messageOf(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) return err.errors.map(messageOf).join('; ');
  return err instanceof Error ? err.message || err.name : String(err);
}

/** Opens a PostgresStore (see PostgresStore.open). */
export const openPostgresStore = (options: PostgresStoreOptions): Promise<PostgresStore> =>
  PostgresStore.open(options);
