// One database per SQL driver for the tests that run on all three: PostgreSQL (postgres.ts), MariaDB
// (mariadb.ts) and SQLite (a file in a temp dir). Each test takes an empty database of its own (a
// schema, a database, a file) and can run SQL on it outside the store, as the Go server or an operator
// would.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import mysql from 'mysql2/promise';
import type { Row, SqlDriver, SqlValue } from '../../../src/central/sql/dialect.ts';
import { testMariaDB } from './mariadb.ts';
import { testPostgres } from './postgres.ts';

export interface IsolatedDatabase {
  dsn: string;
  /** Runs one statement outside the store. SQLite: only while no store has the file open (its lock). */
  exec(sql: string, params?: SqlValue[]): Promise<Row[]>;
  /** Locks berth_leases against every statement of the store until the returned function (not SQLite). */
  lockTable?(): Promise<() => Promise<void>>;
  drop(): Promise<void>;
}

export interface SqlTestDatabase {
  driver: SqlDriver;
  create(): Promise<IsolatedDatabase>;
  stop(): Promise<void>;
}

export type SqlTestDatabaseResult = { ok: true; db: SqlTestDatabase } | { ok: false; reason: string };

export async function sqlTestDatabase(driver: SqlDriver, suite: string): Promise<SqlTestDatabaseResult> {
  switch (driver) {
    case 'postgres': {
      const r = await testPostgres(suite);
      if (!r.ok) return r;
      const { pg } = r;
      return {
        ok: true,
        db: {
          driver,
          async create() {
            const schema = await pg.createSchema();
            return {
              dsn: schema.dsn,
              async exec(sql, params = []) {
                const client = await pg.admin.connect();
                try {
                  await client.query(`SET search_path TO ${schema.name}`);
                  return (await client.query(sql, params)).rows;
                } finally {
                  await client.query('RESET search_path');
                  client.release();
                }
              },
              async lockTable() {
                const client = await pg.admin.connect();
                await client.query('BEGIN');
                await client.query(`LOCK TABLE ${schema.name}.berth_leases IN ACCESS EXCLUSIVE MODE`);
                return async () => {
                  await client.query('ROLLBACK');
                  client.release();
                };
              },
              drop: schema.drop,
            };
          },
          stop: () => pg.stop(),
        },
      };
    }
    case 'mysql': {
      const r = await testMariaDB(suite);
      if (!r.ok) return r;
      const { db } = r;
      return {
        ok: true,
        db: {
          driver,
          async create() {
            const database = await db.createDatabase();
            return {
              dsn: database.dsn,
              async exec(sql, params = []) {
                const conn = await mysql.createConnection({ uri: database.dsn, dateStrings: true });
                try {
                  const [result] = await conn.query(sql, params);
                  return Array.isArray(result) ? (result as Row[]) : [];
                } finally {
                  await conn.end();
                }
              },
              async lockTable() {
                const conn = await mysql.createConnection({ uri: database.dsn });
                await conn.query('LOCK TABLES berth_leases WRITE');
                return async () => {
                  await conn.query('UNLOCK TABLES');
                  await conn.end();
                };
              },
              drop: database.drop,
            };
          },
          stop: () => db.stop(),
        },
      };
    }
    case 'sqlite':
      return {
        ok: true,
        db: {
          driver,
          async create() {
            const dir = await mkdtemp(join(tmpdir(), 'berth-sqlite-'));
            const file = join(dir, 'leases.db');
            return {
              dsn: file,
              async exec(sql, params = []) {
                const conn = new DatabaseSync(file);
                try {
                  const statement = conn.prepare(sql);
                  if (statement.columns().length > 0) return statement.all(...params) as Row[];
                  statement.run(...params);
                  return [];
                } finally {
                  conn.close();
                }
              },
              drop: () => rm(dir, { recursive: true, force: true }),
            };
          },
          stop: async () => {},
        },
      };
  }
}
