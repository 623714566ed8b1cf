// The I/O edge of the SQL lease store: a pool of sessions per driver, each running one statement at a
// time with bounded waits. The driver modules are loaded only when their driver is chosen.
import type { SqlDriver } from './dialect.ts';
import type { PoolOptions, SqlPool } from './session.ts';

export async function openPool(driver: SqlDriver, options: PoolOptions): Promise<SqlPool> {
  switch (driver) {
    case 'postgres':
      return (await import('./pg.ts')).openPgPool(options);
    case 'mysql':
      return (await import('./mysql.ts')).openMysqlPool(options);
    case 'sqlite':
      return (await import('./sqlite.ts')).openSqlitePool(options);
  }
}
