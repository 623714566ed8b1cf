// The berth_leases table (reference/berth-spec.md §3.8): its DDL for `--sql-migrate auto`, and the pure
// check `--sql-migrate off` runs at start-up against what information_schema reports, naming every
// mismatch. Times are timestamptz written from epoch milliseconds computed by the lease manager's clock
// (see store.ts for why the database clock is never consulted); no column has a time default.

export const TABLE = 'berth_leases';

/** Double-quotes an SQL identifier. */
export const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/** `berth_leases`, or `"schema".berth_leases` when a schema is given. */
export const qualifiedTable = (schema: string | undefined): string =>
  schema === undefined ? TABLE : `${quoteIdent(schema)}.${TABLE}`;

export function createTableSql(schema: string | undefined): string {
  return `CREATE TABLE IF NOT EXISTS ${qualifiedTable(schema)} (
  namespace     text        NOT NULL,
  name          text        NOT NULL,
  holder        text        NOT NULL,
  ttl_ms        bigint      NOT NULL CHECK (ttl_ms >= 0),
  acquired_at   timestamptz NOT NULL,
  renewed_at    timestamptz NOT NULL,
  fencing_token integer     NOT NULL CHECK (fencing_token >= 0),
  version       bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
  PRIMARY KEY (namespace, name)
)`;
}

/** One row of information_schema.columns, as the verification query selects it. */
export interface ColumnInfo {
  column_name: string;
  data_type: string;
  is_nullable: 'YES' | 'NO';
  character_maximum_length: number | null;
}

interface ExpectedColumn {
  name: string;
  /** Accepted information_schema data types. */
  types: readonly string[];
  /** For character varying: the shortest length that fits every valid value. */
  minLength?: number;
}

const TEXT = ['text', 'character varying'] as const;

// Key lengths from the API's validation (§3.5): a DNS label namespace, a DNS subdomain name, a holder
// of at most 253 bytes (legacy holders may be longer, hence text in our DDL).
export const EXPECTED_COLUMNS: readonly ExpectedColumn[] = [
  { name: 'namespace', types: TEXT, minLength: 63 },
  { name: 'name', types: TEXT, minLength: 253 },
  { name: 'holder', types: TEXT, minLength: 253 },
  { name: 'ttl_ms', types: ['bigint'] },
  { name: 'acquired_at', types: ['timestamp with time zone'] },
  { name: 'renewed_at', types: ['timestamp with time zone'] },
  { name: 'fencing_token', types: ['integer', 'bigint'] },
  { name: 'version', types: ['bigint'] },
];

export const EXPECTED_PRIMARY_KEY = ['namespace', 'name'] as const;

/**
 * Every way the table differs from what the store needs; empty when it is usable. Extra columns are
 * accepted when they are nullable (inserts leave them NULL); a NOT NULL extra column would make every
 * insert fail, so it is reported.
 */
export function schemaMismatches(
  columns: readonly ColumnInfo[],
  primaryKey: readonly string[],
  extraColumnDefaults: ReadonlySet<string> = new Set(),
): string[] {
  if (columns.length === 0) return [`table ${TABLE} does not exist`];
  const problems: string[] = [];
  const byName = new Map(columns.map((c) => [c.column_name, c]));
  for (const want of EXPECTED_COLUMNS) {
    const got = byName.get(want.name);
    if (got === undefined) {
      problems.push(`column ${want.name} is missing`);
      continue;
    }
    if (!want.types.includes(got.data_type)) {
      problems.push(`column ${want.name} is ${got.data_type}, want ${want.types.join(' or ')}`);
    } else if (
      got.data_type === 'character varying' &&
      got.character_maximum_length !== null &&
      want.minLength !== undefined &&
      got.character_maximum_length < want.minLength
    ) {
      problems.push(
        `column ${want.name} is character varying(${got.character_maximum_length}), want at least ${want.minLength}`,
      );
    }
    if (got.is_nullable !== 'NO') problems.push(`column ${want.name} is nullable, want NOT NULL`);
  }
  const known = new Set(EXPECTED_COLUMNS.map((c) => c.name));
  for (const c of columns) {
    if (known.has(c.column_name)) continue;
    if (c.is_nullable === 'NO' && !extraColumnDefaults.has(c.column_name))
      problems.push(`unexpected NOT NULL column ${c.column_name} without a default`);
  }
  if (primaryKey.join(',') !== EXPECTED_PRIMARY_KEY.join(',')) {
    problems.push(
      primaryKey.length === 0
        ? `no primary key, want (${EXPECTED_PRIMARY_KEY.join(', ')})`
        : `primary key is (${primaryKey.join(', ')}), want (${EXPECTED_PRIMARY_KEY.join(', ')})`,
    );
  }
  return problems;
}
