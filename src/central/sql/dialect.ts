// What differs between the three SQL drivers of the lease store, and nothing else: placeholders, the
// Go server's DDL per driver, how a transaction begins, how an instant is written, how the table is
// introspected for the start-up check, and which driver errors mean "the key exists" or "rolled back,
// retry". The store itself (store.ts) is one implementation over this. Columns and types are the Go
// server's (docs/central-stores.md has the table per driver).
import { type ExpectedTable, TABLE, type TableInfo } from './schema.ts';

export const SQL_DRIVERS = ['postgres', 'mysql', 'sqlite'] as const;
export type SqlDriver = (typeof SQL_DRIVERS)[number];

export type SqlValue = string | number;
export type Row = Record<string, unknown>;
export interface QueryResult {
  rows: Row[];
  /** Rows an INSERT/UPDATE changed (matched, for MySQL). */
  affected: number;
}
export type Query = (sql: string, params?: readonly SqlValue[]) => Promise<QueryResult>;

export interface Dialect {
  readonly driver: SqlDriver;
  /** CREATE TABLE IF NOT EXISTS, the Go server's columns and types. */
  readonly createTable: string;
  /** Run before createTable in its transaction: serialises replicas migrating together. */
  readonly migrationLock?: string;
  /** Adds `version` to a table written by a Go server older than the version CAS (0.3.1). */
  readonly addVersion: string;
  /** Parameters of get: namespace, name. */
  readonly selectOne: string;
  readonly selectAll: string;
  /** Parameters of insert and update: holder, ttl_ms, acquired_at, renewed_at, fencing_token, namespace, name; update adds the expected version. */
  readonly insert: string;
  readonly update: string;
  /** A cheap probe through the table, so readiness fails when it is gone, not only the server. */
  readonly ping: string;
  begin(readOnly: boolean): string;
  encodeInstant(ms: number): string;
  /** The insert failed because the key exists (only where the insert does not skip duplicates). */
  isDuplicateKey(err: unknown): boolean;
  /** The database rolled the transaction back (deadlock, serialization failure): safe to run again. */
  isRetryable(err: unknown): boolean;
  readonly expected: ExpectedTable;
  introspect(query: Query): Promise<TableInfo>;
}

const COLUMNS = 'namespace, name, holder, ttl_ms, acquired_at, renewed_at, fencing_token, version';

function statements(p: (n: number) => string, insertSuffix: string) {
  return {
    selectOne: `SELECT ${COLUMNS} FROM ${TABLE} WHERE namespace = ${p(1)} AND name = ${p(2)}`,
    selectAll: `SELECT ${COLUMNS} FROM ${TABLE}`,
    insert:
      `INSERT INTO ${TABLE} (holder, ttl_ms, acquired_at, renewed_at, fencing_token, namespace, name, version) ` +
      `VALUES (${[1, 2, 3, 4, 5, 6, 7].map(p).join(', ')}, 1)${insertSuffix}`,
    update:
      `UPDATE ${TABLE} SET holder = ${p(1)}, ttl_ms = ${p(2)}, acquired_at = ${p(3)}, renewed_at = ${p(4)}, ` +
      `fencing_token = ${p(5)}, version = version + 1 WHERE namespace = ${p(6)} AND name = ${p(7)} AND version = ${p(8)}`,
    ping: `SELECT 1 FROM ${TABLE} LIMIT 1`,
  };
}

const errorField = (err: unknown, field: 'code' | 'errno'): unknown =>
  typeof err === 'object' && err !== null ? (err as Record<string, unknown>)[field] : undefined;

const never = (): boolean => false;

const num = (v: unknown): number | undefined => (v === null || v === undefined ? undefined : Number(v));

const postgres: Dialect = {
  driver: 'postgres',
  createTable: `CREATE TABLE IF NOT EXISTS ${TABLE} (
  namespace text NOT NULL,
  name text NOT NULL,
  holder text NOT NULL,
  ttl_ms bigint NOT NULL,
  acquired_at timestamptz NOT NULL,
  renewed_at timestamptz NOT NULL,
  fencing_token integer NOT NULL,
  version bigint NOT NULL DEFAULT 1,
  PRIMARY KEY (namespace, name)
)`,
  // Concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL (duplicate pg_type rows).
  migrationLock: `SELECT pg_advisory_xact_lock(hashtext('berth-migrate:' || current_schema()))`,
  addVersion: `ALTER TABLE ${TABLE} ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 1`,
  ...statements((n) => `$${n}`, ' ON CONFLICT (namespace, name) DO NOTHING'),
  begin: (readOnly) => (readOnly ? 'BEGIN READ ONLY' : 'BEGIN'),
  encodeInstant: (ms) => new Date(ms).toISOString(),
  isDuplicateKey: never,
  isRetryable: (err) => ['40001', '40P01'].includes(String(errorField(err, 'code'))),
  expected: {
    columns: [
      { name: 'namespace', types: ['text', 'character varying'], minLength: 63 },
      { name: 'name', types: ['text', 'character varying'], minLength: 253 },
      { name: 'holder', types: ['text', 'character varying'], minLength: 253 },
      { name: 'ttl_ms', types: ['bigint'] },
      { name: 'acquired_at', types: ['timestamp with time zone'] },
      { name: 'renewed_at', types: ['timestamp with time zone'] },
      { name: 'fencing_token', types: ['integer', 'bigint'] },
      { name: 'version', types: ['bigint'] },
    ],
  },
  async introspect(query) {
    const columns = await query(
      `SELECT column_name, data_type, is_nullable, character_maximum_length, column_default
         FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1`,
      [TABLE],
    );
    const pk = await query(
      `SELECT k.column_name
         FROM information_schema.table_constraints t
         JOIN information_schema.key_column_usage k
           ON k.constraint_schema = t.constraint_schema AND k.constraint_name = t.constraint_name
          AND k.table_name = t.table_name
        WHERE t.table_schema = current_schema() AND t.table_name = $1 AND t.constraint_type = 'PRIMARY KEY'
        ORDER BY k.ordinal_position`,
      [TABLE],
    );
    return {
      columns: columns.rows.map((r) => ({
        name: String(r.column_name),
        type: String(r.data_type),
        nullable: r.is_nullable === 'YES',
        hasDefault: r.column_default !== null,
        length: num(r.character_maximum_length),
      })),
      primaryKey: pk.rows.map((r) => String(r.column_name)),
    };
  },
};

const mysql: Dialect = {
  driver: 'mysql',
  // The Go server's DDL; utf8mb4 with a binary collation is ours (a table's default character set
  // may be latin1, and keys must compare byte for byte, as on PostgreSQL and SQLite).
  createTable: `CREATE TABLE IF NOT EXISTS ${TABLE} (
  namespace varchar(253) NOT NULL,
  name varchar(253) NOT NULL,
  holder varchar(253) NOT NULL,
  ttl_ms bigint NOT NULL,
  acquired_at datetime(6) NOT NULL,
  renewed_at datetime(6) NOT NULL,
  fencing_token int NOT NULL,
  version bigint NOT NULL DEFAULT 1,
  PRIMARY KEY (namespace, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
  addVersion: `ALTER TABLE ${TABLE} ADD COLUMN version bigint NOT NULL DEFAULT 1`,
  // A plain insert, as in the Go server: a duplicate key is an error (1062), not a silent no-op.
  ...statements(() => '?', ''),
  begin: (readOnly) => (readOnly ? 'START TRANSACTION READ ONLY' : 'START TRANSACTION READ WRITE'),
  // datetime(6) has no zone: UTC, as the Go server writes it.
  encodeInstant: (ms) => new Date(ms).toISOString().replace('T', ' ').replace('Z', ''),
  isDuplicateKey: (err) => errorField(err, 'errno') === 1062,
  isRetryable: (err) => errorField(err, 'errno') === 1213,
  expected: {
    columns: [
      { name: 'namespace', types: ['varchar'], minLength: 63 },
      { name: 'name', types: ['varchar'], minLength: 253 },
      { name: 'holder', types: ['varchar'], minLength: 253 },
      { name: 'ttl_ms', types: ['bigint'] },
      // Whole seconds would make every lease expire up to a second early.
      { name: 'acquired_at', types: ['datetime'], minPrecision: 3 },
      { name: 'renewed_at', types: ['datetime'], minPrecision: 3 },
      { name: 'fencing_token', types: ['int', 'bigint'] },
      { name: 'version', types: ['bigint'] },
    ],
    engine: 'InnoDB',
  },
  async introspect(query) {
    const where = 'TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?';
    const columns = await query(
      `SELECT COLUMN_NAME AS name, DATA_TYPE AS type, IS_NULLABLE AS nullable, COLUMN_DEFAULT AS dflt,
              CHARACTER_MAXIMUM_LENGTH AS len, DATETIME_PRECISION AS prec
         FROM information_schema.COLUMNS WHERE ${where}`,
      [TABLE],
    );
    const pk = await query(
      `SELECT COLUMN_NAME AS name FROM information_schema.KEY_COLUMN_USAGE
        WHERE ${where} AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION`,
      [TABLE],
    );
    const table = await query(`SELECT ENGINE AS engine FROM information_schema.TABLES WHERE ${where}`, [
      TABLE,
    ]);
    return {
      columns: columns.rows.map((r) => ({
        name: String(r.name),
        type: String(r.type).toLowerCase(),
        nullable: r.nullable === 'YES',
        hasDefault: r.dflt !== null,
        length: num(r.len),
        precision: num(r.prec),
      })),
      primaryKey: pk.rows.map((r) => String(r.name)),
      engine: table.rows[0] === undefined ? undefined : String(table.rows[0].engine),
    };
  },
};

/** SQLite's type affinity of a declared column type (https://sqlite.org/datatype3.html §3.1). */
export function sqliteAffinity(declared: string): string {
  const t = declared.toUpperCase();
  if (t.includes('INT')) return 'integer';
  if (/CHAR|CLOB|TEXT/.test(t)) return 'text';
  if (t.includes('BLOB') || t === '') return 'blob';
  if (/REAL|FLOA|DOUB/.test(t)) return 'real';
  return 'numeric';
}

const sqlite: Dialect = {
  driver: 'sqlite',
  createTable: `CREATE TABLE IF NOT EXISTS ${TABLE} (
  namespace text NOT NULL,
  name text NOT NULL,
  holder text NOT NULL,
  ttl_ms integer NOT NULL,
  acquired_at text NOT NULL,
  renewed_at text NOT NULL,
  fencing_token integer NOT NULL,
  version integer NOT NULL DEFAULT 1,
  PRIMARY KEY (namespace, name)
)`,
  addVersion: `ALTER TABLE ${TABLE} ADD COLUMN version integer NOT NULL DEFAULT 1`,
  ...statements(() => '?', ' ON CONFLICT (namespace, name) DO NOTHING'),
  // IMMEDIATE takes the write lock at BEGIN, so a write never fails half-way on a busy database.
  begin: (readOnly) => (readOnly ? 'BEGIN' : 'BEGIN IMMEDIATE'),
  // RFC 3339 text in UTC, which the Go server's parser reads.
  encodeInstant: (ms) => new Date(ms).toISOString(),
  isDuplicateKey: never,
  isRetryable: never,
  expected: {
    columns: [
      { name: 'namespace', types: ['text'] },
      { name: 'name', types: ['text'] },
      { name: 'holder', types: ['text'] },
      { name: 'ttl_ms', types: ['integer'] },
      { name: 'acquired_at', types: ['text'] },
      { name: 'renewed_at', types: ['text'] },
      { name: 'fencing_token', types: ['integer'] },
      { name: 'version', types: ['integer'] },
    ],
  },
  async introspect(query) {
    const info = await query(
      `SELECT name, type, "notnull" AS not_null, dflt_value, pk FROM pragma_table_info('${TABLE}')`,
    );
    return {
      columns: info.rows.map((r) => ({
        name: String(r.name),
        type: sqliteAffinity(String(r.type)),
        nullable: Number(r.not_null) === 0,
        hasDefault: r.dflt_value !== null,
      })),
      primaryKey: info.rows
        .filter((r) => Number(r.pk) > 0)
        .sort((a, b) => Number(a.pk) - Number(b.pk))
        .map((r) => String(r.name)),
    };
  },
};

const DIALECTS: Record<SqlDriver, Dialect> = { postgres, mysql, sqlite };

export const dialectFor = (driver: SqlDriver): Dialect => DIALECTS[driver];
