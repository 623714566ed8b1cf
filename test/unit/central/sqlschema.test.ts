// The SQL store's pure parts: the Go server's DDL per driver, the start-up schema check
// (`--sql-migrate off`), DSN parsing of the three drivers (the MySQL time parameters among them) and the
// decoding of column values.
import { describe, expect, it } from 'vitest';
import { dialectFor, SQL_DRIVERS, type SqlDriver, sqliteAffinity } from '../../../src/central/sql/dialect.ts';
import {
  describeDsn,
  dsnPassword,
  mysqlDsnConfig,
  pgDsnConfig,
  sqliteDsnConfig,
} from '../../../src/central/sql/dsn.ts';
import { type ColumnInfo, schemaMismatches, type TableInfo } from '../../../src/central/sql/schema.ts';
import { decodeInstant, decodeInteger } from '../../../src/central/sql/values.ts';

const col = (name: string, type: string, extra: Partial<ColumnInfo> = {}): ColumnInfo => ({
  name,
  type,
  nullable: false,
  hasDefault: false,
  ...extra,
});

/** The table each driver's Go DDL creates, as its introspection reports it. */
const GO_TABLES: Record<SqlDriver, TableInfo> = {
  postgres: {
    columns: [
      col('namespace', 'text'),
      col('name', 'text'),
      col('holder', 'text'),
      col('ttl_ms', 'bigint'),
      col('acquired_at', 'timestamp with time zone'),
      col('renewed_at', 'timestamp with time zone'),
      col('fencing_token', 'integer'),
      col('version', 'bigint', { hasDefault: true }),
    ],
    primaryKey: ['namespace', 'name'],
  },
  mysql: {
    columns: [
      col('namespace', 'varchar', { length: 253 }),
      col('name', 'varchar', { length: 253 }),
      col('holder', 'varchar', { length: 253 }),
      col('ttl_ms', 'bigint'),
      col('acquired_at', 'datetime', { precision: 6 }),
      col('renewed_at', 'datetime', { precision: 6 }),
      col('fencing_token', 'int'),
      col('version', 'bigint', { hasDefault: true }),
    ],
    primaryKey: ['namespace', 'name'],
    engine: 'InnoDB',
  },
  sqlite: {
    columns: [
      col('namespace', 'text'),
      col('name', 'text'),
      col('holder', 'text'),
      col('ttl_ms', 'integer'),
      col('acquired_at', 'text'),
      col('renewed_at', 'text'),
      col('fencing_token', 'integer'),
      col('version', 'integer', { hasDefault: true }),
    ],
    primaryKey: ['namespace', 'name'],
  },
};

const check = (driver: SqlDriver, table: TableInfo): string[] =>
  schemaMismatches(dialectFor(driver).expected, table);

const replace = (driver: SqlDriver, name: string, c: ColumnInfo | undefined): TableInfo => ({
  ...GO_TABLES[driver],
  columns: GO_TABLES[driver].columns.flatMap((g) => (g.name === name ? (c ? [c] : []) : [g])),
});

describe('the Go server DDL', () => {
  // Column lines as in the Go server's dialect.go (0.3.1 and later), per driver.
  const goColumns: Record<SqlDriver, string[]> = {
    postgres: [
      'namespace text NOT NULL',
      'name text NOT NULL',
      'holder text NOT NULL',
      'ttl_ms bigint NOT NULL',
      'acquired_at timestamptz NOT NULL',
      'renewed_at timestamptz NOT NULL',
      'fencing_token integer NOT NULL',
      'version bigint NOT NULL DEFAULT 1',
      'PRIMARY KEY (namespace, name)',
    ],
    mysql: [
      'namespace varchar(253) NOT NULL',
      'name varchar(253) NOT NULL',
      'holder varchar(253) NOT NULL',
      'ttl_ms bigint NOT NULL',
      'acquired_at datetime(6) NOT NULL',
      'renewed_at datetime(6) NOT NULL',
      'fencing_token int NOT NULL',
      'version bigint NOT NULL DEFAULT 1',
      'PRIMARY KEY (namespace, name)',
    ],
    sqlite: [
      'namespace text NOT NULL',
      'name text NOT NULL',
      'holder text NOT NULL',
      'ttl_ms integer NOT NULL',
      'acquired_at text NOT NULL',
      'renewed_at text NOT NULL',
      'fencing_token integer NOT NULL',
      'version integer NOT NULL DEFAULT 1',
      'PRIMARY KEY (namespace, name)',
    ],
  };

  it.each(SQL_DRIVERS)('%s: creates exactly the Go columns, with no time default', (driver) => {
    const ddl = dialectFor(driver).createTable;
    const body = /\(\n([\s\S]*)\n\)/.exec(ddl)![1]!;
    expect(body.split(',\n').map((l) => l.trim())).toEqual(goColumns[driver]);
    expect(ddl).toMatch(/^CREATE TABLE IF NOT EXISTS berth_leases \(/);
    expect(ddl).not.toMatch(/now\(\)|current_timestamp|default current/i);
    expect(check(driver, GO_TABLES[driver])).toEqual([]);
  });

  it('mysql: InnoDB with utf8mb4 and a binary collation', () => {
    expect(dialectFor('mysql').createTable).toMatch(
      /\) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin$/,
    );
  });

  it('writes the CAS in the statement: version = expected, version + 1', () => {
    for (const driver of SQL_DRIVERS) {
      const d = dialectFor(driver);
      expect(d.update).toMatch(
        /version = version \+ 1 WHERE namespace = (\?|\$6) AND name = (\?|\$7) AND version = (\?|\$8)$/,
      );
      expect(d.insert).toMatch(/, 1\)( ON CONFLICT \(namespace, name\) DO NOTHING)?$/);
    }
    expect(dialectFor('mysql').insert).not.toMatch(/ON DUPLICATE|IGNORE/);
  });

  it('classifies driver errors: a duplicate key is a conflict, a deadlock or serialization failure a retry', () => {
    const mysql = dialectFor('mysql');
    const pg = dialectFor('postgres');
    expect(mysql.isDuplicateKey({ errno: 1062, code: 'ER_DUP_ENTRY' })).toBe(true);
    expect(mysql.isDuplicateKey({ errno: 1048 })).toBe(false);
    expect(mysql.isRetryable({ errno: 1213, code: 'ER_LOCK_DEADLOCK' })).toBe(true);
    expect(mysql.isRetryable({ errno: 1205 })).toBe(false); // a lock wait timeout is the bound, not a retry
    expect(pg.isRetryable({ code: '40001' })).toBe(true);
    expect(pg.isRetryable({ code: '40P01' })).toBe(true);
    expect(pg.isRetryable({ code: '23505' })).toBe(false);
    for (const d of [pg, dialectFor('sqlite')])
      expect(d.isDuplicateKey({ code: '23505', errno: 1062 })).toBe(false);
    expect(dialectFor('sqlite').isRetryable({ errcode: 5 })).toBe(false);
  });
});

describe('schemaMismatches', () => {
  it('accepts compatible variants', () => {
    expect(
      check('postgres', {
        ...replace('postgres', 'namespace', col('namespace', 'character varying', { length: 63 })),
        columns: [
          ...replace(
            'postgres',
            'namespace',
            col('namespace', 'character varying', { length: 63 }),
          ).columns.map((c) => (c.name === 'fencing_token' ? col('fencing_token', 'bigint') : c)),
          col('comment', 'text', { nullable: true }),
          col('owner', 'text', { hasDefault: true }),
        ],
      }),
    ).toEqual([]);
    expect(
      check('mysql', replace('mysql', 'acquired_at', col('acquired_at', 'datetime', { precision: 3 }))),
    ).toEqual([]);
  });

  it('names every mismatch', () => {
    expect(check('postgres', { columns: [], primaryKey: [] })).toEqual(['table berth_leases does not exist']);
    expect(check('postgres', replace('postgres', 'version', undefined))).toEqual([
      'column version is missing',
    ]);
    expect(
      check('postgres', replace('postgres', 'renewed_at', col('renewed_at', 'timestamp without time zone'))),
    ).toEqual(['column renewed_at is timestamp without time zone, want timestamp with time zone']);
    expect(check('postgres', replace('postgres', 'version', col('version', 'integer')))).toEqual([
      'column version is integer, want bigint',
    ]);
    expect(
      check('postgres', replace('postgres', 'holder', col('holder', 'text', { nullable: true }))),
    ).toEqual(['column holder is nullable, want NOT NULL']);
    expect(
      check('postgres', replace('postgres', 'name', col('name', 'character varying', { length: 100 }))),
    ).toEqual(['column name is character varying(100), want at least 253']);
    expect(
      check('postgres', {
        ...GO_TABLES.postgres,
        columns: [...GO_TABLES.postgres.columns, col('owner', 'text')],
      }),
    ).toEqual(['unexpected NOT NULL column owner without a default']);
    expect(check('postgres', { ...GO_TABLES.postgres, primaryKey: ['namespace'] })).toEqual([
      'primary key is (namespace), want (namespace, name)',
    ]);
    expect(check('postgres', { ...GO_TABLES.postgres, primaryKey: [] })).toEqual([
      'no primary key, want (namespace, name)',
    ]);
  });

  it('mysql: refuses whole-second datetimes, timestamp columns, short keys and a non-transactional engine', () => {
    expect(
      check('mysql', replace('mysql', 'renewed_at', col('renewed_at', 'datetime', { precision: 0 }))),
    ).toEqual(['column renewed_at is datetime(0), want datetime(3) or finer']);
    expect(
      check('mysql', replace('mysql', 'acquired_at', col('acquired_at', 'timestamp', { precision: 6 }))),
    ).toEqual(['column acquired_at is timestamp, want datetime']);
    expect(
      check('mysql', replace('mysql', 'namespace', col('namespace', 'varchar', { length: 20 }))),
    ).toEqual(['column namespace is varchar(20), want at least 63']);
    expect(check('mysql', { ...GO_TABLES.mysql, engine: 'MyISAM' })).toEqual([
      'table berth_leases uses the MyISAM engine, want InnoDB (transactions)',
    ]);
  });

  it('sqlite: compares type affinities', () => {
    expect(['TEXT', 'varchar(253)', 'INTEGER', 'bigint', 'datetime', 'REAL', ''].map(sqliteAffinity)).toEqual(
      ['text', 'text', 'integer', 'integer', 'numeric', 'real', 'blob'],
    );
    expect(check('sqlite', replace('sqlite', 'acquired_at', col('acquired_at', 'numeric')))).toEqual([
      'column acquired_at is numeric, want text',
    ]);
  });
});

describe('instants and integers from the drivers', () => {
  const T = Date.UTC(2026, 4, 24, 10, 30, 0, 123);
  it.each([
    ['2026-05-24T10:30:00.123Z', T], // ours, SQLite and PostgreSQL
    ['2026-05-24T10:30:00.123456Z', T], // the Go server's RFC 3339 with microseconds: truncated
    ['2026-05-24T10:30:00.123999999Z', T], // never rounded up
    ['2026-05-24 10:30:00.123456', T], // MySQL datetime(6): UTC
    ['2026-05-24 10:30:00', T - 123],
    ['2026-05-24T10:30:00Z', T - 123], // Go's RFC3339Nano drops a zero fraction
    ['2026-05-24 12:30:00.123+02:00', T],
    ['2026-05-24 05:30:00.123-05', T],
    ['0001-01-01T00:00:00Z', -62_135_596_800_000], // Go's zero time: no 1900s offset
  ])('%s', (text, want) => {
    expect(decodeInstant(text, 'renewed_at')).toBe(want);
  });

  it('refuses what is not an instant, naming the column', () => {
    for (const bad of ['2026-02-30 10:00:00', '2026-05-24T25:00:00Z', 'yesterday', 1_779_618_600_123])
      expect(() => decodeInstant(bad, 'acquired_at')).toThrow(/^acquired_at: not an instant/);
    expect(decodeInstant(new Date(T), 'x')).toBe(T);
  });

  it('decodes bigints from text and bigint, refusing unsafe ones', () => {
    expect(decodeInteger('9007199254740991', 'version')).toBe(Number.MAX_SAFE_INTEGER);
    expect(decodeInteger(7n, 'version')).toBe(7);
    expect(decodeInteger(3, 'version')).toBe(3);
    expect(() => decodeInteger('9007199254740993', 'version')).toThrow(
      'version: 9007199254740993 is not a safe integer',
    );
    expect(() => decodeInteger('1.5', 'ttl_ms')).toThrow('ttl_ms: 1.5 is not a safe integer');
  });

  it('writes instants each driver reads back as the same UTC instant', () => {
    expect(dialectFor('postgres').encodeInstant(T)).toBe('2026-05-24T10:30:00.123Z');
    expect(dialectFor('mysql').encodeInstant(T)).toBe('2026-05-24 10:30:00.123');
    expect(dialectFor('sqlite').encodeInstant(T)).toBe('2026-05-24T10:30:00.123Z');
    for (const driver of SQL_DRIVERS) expect(decodeInstant(dialectFor(driver).encodeInstant(T), 'x')).toBe(T);
  });
});

describe('DSNs', () => {
  it('describes a DSN for logs without its password, for every driver', () => {
    expect(describeDsn('postgres', 'postgresql://berth:pw@db:5432/leases')).toBe('berth@db:5432/leases');
    expect(describeDsn('postgres', 'host=db port=5433 user=berth password=pw dbname=leases')).toBe(
      'berth@db:5433/leases',
    );
    expect(describeDsn('mysql', 'berth:pw@tcp(db:3306)/leases?tls=true')).toBe('berth@db:3306/leases');
    expect(describeDsn('mysql', 'mysql://berth:pw@db/leases')).toBe('berth@db:3306/leases');
    expect(describeDsn('mysql', 'berth:pw@unix(/run/mysqld/mysqld.sock)/leases')).toBe(
      'berth@/run/mysqld/mysqld.sock/leases',
    );
    expect(describeDsn('sqlite', 'file:/var/lib/berth/leases.db?mode=rwc')).toBe('/var/lib/berth/leases.db');
    expect(describeDsn('mysql', 'pw-only garbage @@')).toBe('(unparsable DSN)');
  });

  it('finds the password to scrub from driver messages', () => {
    expect(dsnPassword('postgres', 'postgres://u:s3cr%40t@db/x')).toBe('s3cr@t');
    expect(dsnPassword('postgres', 'postgres://u@db/x?password=pw')).toBe('pw');
    expect(dsnPassword('postgres', "host=db password='p w\\'x'")).toBe("p w'x");
    expect(dsnPassword('mysql', 'berth:p@ss:w/rd@tcp(db)/x')).toBe('p@ss:w/rd');
    expect(dsnPassword('mysql', 'mysql://berth:p%40ss@db/x')).toBe('p@ss');
    expect(dsnPassword('sqlite', '/var/lib/berth/leases.db')).toBeUndefined();
  });

  it('postgres: turns either form into node-postgres settings, refusing what it cannot honour', () => {
    expect(pgDsnConfig(' postgres://u:p@db/x ')).toEqual({ connectionString: 'postgres://u:p@db/x' });
    expect(
      pgDsnConfig(
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
    expect(pgDsnConfig('host=db sslmode=disable connect_timeout=3')).toEqual({ host: 'db', ssl: false });
    expect(() => pgDsnConfig('host=db sslmode=prefer')).toThrow('sslmode "prefer" is not supported');
    expect(() => pgDsnConfig('host=db target_session_attrs=any')).toThrow(
      'key "target_session_attrs" is not supported',
    );
    expect(() => pgDsnConfig('host=db port=x')).toThrow('invalid port "x"');
    expect(() => pgDsnConfig('just words')).toThrow('want key=value pairs or a postgres:// URL');
  });

  it("mysql: reads the Go driver's form and URLs alike", () => {
    expect(
      mysqlDsnConfig('berth:pw@tcp(db.example:3307)/leases?parseTime=true&loc=UTC&timeout=5s&tls=true'),
    ).toEqual({
      user: 'berth',
      password: 'pw',
      host: 'db.example',
      port: 3307,
      database: 'leases',
      ssl: { rejectUnauthorized: true },
    });
    expect(mysqlDsnConfig('berth@tcp([::1])/leases')).toMatchObject({ host: '::1', port: 3306 });
    expect(mysqlDsnConfig('/leases')).toMatchObject({ host: '127.0.0.1', port: 3306, database: 'leases' });
    expect(mysqlDsnConfig('u:p@unix(/run/mysqld.sock)/leases?tls=false')).toEqual({
      user: 'u',
      password: 'p',
      socketPath: '/run/mysqld.sock',
      database: 'leases',
    });
    expect(
      mysqlDsnConfig('mysql://berth:p%40ss@db:3307/leases?tls=skip-verify&time_zone=%27%2B00%3A00%27'),
    ).toEqual({
      user: 'berth',
      password: 'p@ss',
      host: 'db',
      port: 3307,
      database: 'leases',
      ssl: { rejectUnauthorized: false },
    });
  });

  it('mysql: refuses time parameters that would read the datetime columns in another zone (#191)', () => {
    expect(() => mysqlDsnConfig('u:secret@tcp(db)/x?loc=Local')).toThrow(
      'mysql dsn loc="Local" is not supported: lease timestamps are stored as zoneless datetime(6) and must round-trip in UTC; remove the loc parameter or set loc=UTC',
    );
    expect(() => mysqlDsnConfig('u:secret@tcp(db)/x?loc=Europe%2FBerlin')).toThrow('loc="Europe/Berlin"');
    expect(() => mysqlDsnConfig("mysql://u:secret@db/x?time_zone='%2B02:00'")).toThrow(
      `mysql dsn time_zone="'+02:00'" is not supported`,
    );
    for (const [dsn, message] of [
      ['u:secret@tcp(db)/x?clientFoundRows=true', 'mysql dsn parameter "clientFoundRows" is not supported'],
      ['u:secret@tcp(db)/x?tls=preferred', 'tls="preferred" is not supported'],
      ['u:secret@tcp(db)/x?charset=latin1', 'charset="latin1" is not supported'],
      ['u:secret@udp(db)/x', 'network "udp" is not supported'],
      ['u:secret@tcp(db:99999)/x', 'invalid port "99999"'],
      ['no-slash-here', 'invalid mysql dsn'],
    ] as const) {
      let thrown: unknown;
      try {
        mysqlDsnConfig(dsn);
      } catch (err) {
        thrown = err;
      }
      expect(String(thrown)).toContain(message);
      expect(String(thrown)).not.toContain('secret');
    }
  });

  it('sqlite: paths, :memory: and file: URIs as the Go driver takes them', () => {
    expect(sqliteDsnConfig('/var/lib/berth/leases.db')).toMatchObject({
      memory: false,
      describe: '/var/lib/berth/leases.db',
    });
    expect(String(sqliteDsnConfig('/var/lib/berth/leases.db').location)).toBe(
      'file:///var/lib/berth/leases.db',
    );
    expect(
      String(sqliteDsnConfig('file:///var/lib/berth/leases.db?mode=rw&_pragma=busy_timeout(5000)').location),
    ).toBe('file:///var/lib/berth/leases.db?mode=rw');
    expect(sqliteDsnConfig('file:leases.db?_pragma=journal_mode(WAL)&_txlock=immediate').describe).toBe(
      `${process.cwd()}/leases.db`,
    );
    for (const memory of [':memory:', 'file::memory:?cache=shared', 'file:x?mode=memory&cache=shared'])
      expect(sqliteDsnConfig(memory)).toEqual({ location: ':memory:', memory: true, describe: ':memory:' });
    expect(() => sqliteDsnConfig('file:/x.db?mode=ro')).toThrow(
      'mode=ro is not supported: the lease store writes',
    );
    expect(() => sqliteDsnConfig('file:/x.db?_pragma=journal_mode(DELETE)')).toThrow(
      '_pragma="journal_mode(DELETE)"',
    );
    expect(() => sqliteDsnConfig('file:/x.db?_time_format=sqlite')).toThrow(
      'sqlite dsn parameter "_time_format" is not supported',
    );
  });
});
