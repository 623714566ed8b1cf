// The start-up check of berth_leases (always after `--sql-migrate auto`, alone with `off`): a pure
// comparison of what the database reports against what the store needs, naming every mismatch.

/** The Go server's table. */
export const TABLE = 'berth_leases';

/** One column as introspected, normalised across drivers (SQLite: its type affinity). */
export interface ColumnInfo {
  name: string;
  type: string;
  nullable: boolean;
  hasDefault: boolean;
  /** Character length of varchar columns. */
  length?: number;
  /** Fractional-second digits of datetime columns (MySQL). */
  precision?: number;
}

export interface TableInfo {
  /** Empty when the table does not exist. */
  columns: ColumnInfo[];
  primaryKey: string[];
  /** Storage engine (MySQL). */
  engine?: string;
}

export interface ExpectedColumn {
  name: string;
  /** Accepted types; the first is the one the store creates. */
  types: readonly string[];
  /** For varchar: the shortest length that fits every valid value (the API limits keys and holders). */
  minLength?: number;
  /** For datetime: the fewest fractional-second digits that keep milliseconds. */
  minPrecision?: number;
}

export interface ExpectedTable {
  columns: readonly ExpectedColumn[];
  engine?: string;
}

export const PRIMARY_KEY = ['namespace', 'name'] as const;

/**
 * Every way the table differs from what the store needs; empty when it is usable. Extra columns are
 * accepted when inserts can leave them out (nullable, or with a default).
 */
export function schemaMismatches(expected: ExpectedTable, table: TableInfo): string[] {
  if (table.columns.length === 0) return [`table ${TABLE} does not exist`];
  const problems: string[] = [];
  const byName = new Map(table.columns.map((c) => [c.name, c]));
  for (const want of expected.columns) {
    const got = byName.get(want.name);
    if (got === undefined) {
      problems.push(`column ${want.name} is missing`);
      continue;
    }
    if (!want.types.includes(got.type)) {
      problems.push(`column ${want.name} is ${got.type}, want ${want.types.join(' or ')}`);
    } else if (want.minLength !== undefined && got.length !== undefined && got.length < want.minLength) {
      problems.push(`column ${want.name} is ${got.type}(${got.length}), want at least ${want.minLength}`);
    } else if (want.minPrecision !== undefined && (got.precision ?? 0) < want.minPrecision) {
      problems.push(
        `column ${want.name} is ${got.type}(${got.precision ?? 0}), want ${got.type}(${want.minPrecision}) or finer`,
      );
    }
    if (got.nullable) problems.push(`column ${want.name} is nullable, want NOT NULL`);
  }
  const known = new Set(expected.columns.map((c) => c.name));
  for (const c of table.columns)
    if (!known.has(c.name) && !c.nullable && !c.hasDefault)
      problems.push(`unexpected NOT NULL column ${c.name} without a default`);
  if (table.primaryKey.join(',') !== PRIMARY_KEY.join(',')) {
    problems.push(
      table.primaryKey.length === 0
        ? `no primary key, want (${PRIMARY_KEY.join(', ')})`
        : `primary key is (${table.primaryKey.join(', ')}), want (${PRIMARY_KEY.join(', ')})`,
    );
  }
  if (expected.engine !== undefined && table.engine?.toLowerCase() !== expected.engine.toLowerCase())
    problems.push(`table ${TABLE} uses the ${table.engine} engine, want ${expected.engine} (transactions)`);
  return problems;
}
