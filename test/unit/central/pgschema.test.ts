// The PostgreSQL schema check (`--sql-migrate off`) and DSN redaction: pure functions.
import { describe, expect, it } from 'vitest';
import { describeDsn, dsnConfig, redactDsn } from '../../../src/central/postgres/dsn.ts';
import { type ColumnInfo, createTableSql, schemaMismatches } from '../../../src/central/postgres/schema.ts';

const col = (column_name: string, data_type: string, extra: Partial<ColumnInfo> = {}): ColumnInfo => ({
  column_name,
  data_type,
  is_nullable: 'NO',
  character_maximum_length: null,
  ...extra,
});

const GOOD: ColumnInfo[] = [
  col('namespace', 'text'),
  col('name', 'text'),
  col('holder', 'text'),
  col('ttl_ms', 'bigint'),
  col('acquired_at', 'timestamp with time zone'),
  col('renewed_at', 'timestamp with time zone'),
  col('fencing_token', 'integer'),
  col('version', 'bigint'),
];
const PK = ['namespace', 'name'];

const replace = (name: string, c: ColumnInfo | undefined): ColumnInfo[] =>
  GOOD.flatMap((g) => (g.column_name === name ? (c ? [c] : []) : [g]));

describe('schemaMismatches', () => {
  it('accepts the table we create, and compatible variants', () => {
    expect(schemaMismatches(GOOD, PK)).toEqual([]);
    expect(
      schemaMismatches(
        [
          ...replace('namespace', col('namespace', 'character varying', { character_maximum_length: 63 })),
          col('comment', 'text', { is_nullable: 'YES' }),
        ].map((c) => (c.column_name === 'fencing_token' ? col('fencing_token', 'bigint') : c)),
        PK,
      ),
    ).toEqual([]);
  });

  it('names every mismatch', () => {
    expect(schemaMismatches([], PK)).toEqual(['table berth_leases does not exist']);
    expect(schemaMismatches(replace('version', undefined), PK)).toEqual(['column version is missing']);
    expect(
      schemaMismatches(replace('renewed_at', col('renewed_at', 'timestamp without time zone')), PK),
    ).toEqual(['column renewed_at is timestamp without time zone, want timestamp with time zone']);
    expect(schemaMismatches(replace('version', col('version', 'integer')), PK)).toEqual([
      'column version is integer, want bigint',
    ]);
    expect(schemaMismatches(replace('holder', col('holder', 'text', { is_nullable: 'YES' })), PK)).toEqual([
      'column holder is nullable, want NOT NULL',
    ]);
    expect(
      schemaMismatches(
        replace('name', col('name', 'character varying', { character_maximum_length: 100 })),
        PK,
      ),
    ).toEqual(['column name is character varying(100), want at least 253']);
    expect(schemaMismatches([...GOOD, col('owner', 'text')], PK)).toEqual([
      'unexpected NOT NULL column owner without a default',
    ]);
    expect(schemaMismatches([...GOOD, col('owner', 'text')], PK, new Set(['owner']))).toEqual([]);
    expect(schemaMismatches(GOOD, ['namespace'])).toEqual([
      'primary key is (namespace), want (namespace, name)',
    ]);
    expect(schemaMismatches(GOOD, [])).toEqual(['no primary key, want (namespace, name)']);
  });

  it('creates exactly the columns it verifies, with no time default', () => {
    const ddl = createTableSql(undefined);
    for (const c of GOOD) expect(ddl).toContain(c.column_name);
    expect(ddl).toContain('PRIMARY KEY (namespace, name)');
    expect(ddl).not.toMatch(/now\(\)|current_timestamp/i);
    expect(createTableSql('we"ird')).toContain('CREATE TABLE IF NOT EXISTS "we""ird".berth_leases');
  });
});

describe('DSN redaction', () => {
  it.each([
    ['postgresql://berth:s3cr%40t@db:5432/leases', 'postgresql://berth:***@db:5432/leases'],
    ['postgres://berth:pw@db/leases?sslmode=require', 'postgres://berth:***@db/leases?sslmode=require'],
    [
      'postgres://berth@db/leases?password=pw&sslmode=disable',
      'postgres://berth@db/leases?password=***&sslmode=disable',
    ],
    ['host=db user=berth password=pw dbname=leases', 'host=db user=berth password=*** dbname=leases'],
    ["host=db password='p w\\'x' dbname=leases", 'host=db password=*** dbname=leases'],
    ['postgres://db/leases', 'postgres://db/leases'],
  ])('%s', (dsn, want) => {
    expect(redactDsn(dsn)).toBe(want);
  });

  it('describes a DSN for logs without its password', () => {
    expect(describeDsn('postgresql://berth:pw@db:5432/leases')).toBe('berth@db:5432/leases');
    expect(describeDsn('host=db port=5433 user=berth password=pw dbname=leases')).toBe(
      'berth@db:5433/leases',
    );
  });

  it('turns either DSN form into node-postgres settings, refusing what it cannot honour', () => {
    expect(dsnConfig(' postgres://u:p@db/x ')).toEqual({ connectionString: 'postgres://u:p@db/x' });
    expect(
      dsnConfig(
        "host=db port=5433 user=berth password='it\\'s a secret' dbname=leases sslmode=verify-full options='-c search_path=b'",
      ),
    ).toEqual({
      host: 'db',
      port: 5433,
      user: 'berth',
      password: "it's a secret",
      database: 'leases',
      ssl: { rejectUnauthorized: true },
      options: '-c search_path=b',
    });
    expect(dsnConfig('host=db sslmode=disable connect_timeout=3')).toEqual({ host: 'db', ssl: false });
    expect(() => dsnConfig('host=db sslmode=prefer')).toThrow('sslmode "prefer" is not supported');
    expect(() => dsnConfig('host=db target_session_attrs=any')).toThrow(
      'key "target_session_attrs" is not supported',
    );
    expect(() => dsnConfig('host=db port=x')).toThrow('invalid port "x"');
    expect(() => dsnConfig('just words')).toThrow('want key=value pairs or a postgres:// URL');
  });
});
