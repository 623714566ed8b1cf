// Connection strings of the three SQL drivers, parsed into explicit driver settings. Parameters with no
// safe equivalent are refused, not ignored. A DSN's password never reaches a log or an error message:
// describeDsn gives the loggable part, dsnPassword what to scrub from driver messages.
//   postgres  libpq URL (postgres://user:pw@host:5432/db?sslmode=require) or key=value (host=db user=u)
//   mysql     the Go driver's form (user:pw@tcp(host:3306)/db?tls=true, user:pw@unix(/run/mysqld.sock)/db)
//             or a mysql:// URL, with the same parameters
//   sqlite    a file path, :memory:, or a file: URI (file:/var/lib/berth/leases.db?mode=rwc)
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { SqlDriver } from './dialect.ts';

/** `user@host:port/database` (or the SQLite path) for logs; never the password. */
export function describeDsn(driver: SqlDriver, dsn: string): string {
  try {
    switch (driver) {
      case 'postgres':
        return describePg(dsn.trim());
      case 'mysql': {
        const { config: c } = parseMysqlDsn(dsn);
        const where = c.socketPath ?? `${c.host}:${c.port}`;
        return `${c.user ? `${c.user}@` : ''}${where}/${c.database ?? ''}`;
      }
      case 'sqlite':
        return sqliteDsnConfig(dsn).describe;
    }
  } catch {
    // A SQLite DSN holds no secret.
    return driver === 'sqlite' ? dsn.trim().replace(/\?.*$/, '') : '(unparsable DSN)';
  }
}

/** The password a DSN carries, to be scrubbed from driver messages that may echo it. */
export function dsnPassword(driver: SqlDriver, dsn: string): string | undefined {
  try {
    switch (driver) {
      case 'postgres': {
        const c = pgDsnConfig(dsn);
        if (c.connectionString === undefined) return c.password;
        const url = new URL(c.connectionString);
        return url.password
          ? decodeURIComponent(url.password)
          : (url.searchParams.get('password') ?? undefined);
      }
      case 'mysql':
        return parseMysqlDsn(dsn).config.password;
      case 'sqlite':
        return undefined;
    }
  } catch {
    return undefined;
  }
}

// --- PostgreSQL -----------------------------------------------------------------------------------

const PG_URL = /^postgres(ql)?:\/\//i;

function describePg(dsn: string): string {
  if (PG_URL.test(dsn)) {
    const url = new URL(dsn);
    const user = url.username ? `${decodeURIComponent(url.username)}@` : '';
    return `${user}${url.host}${url.pathname}`;
  }
  const c = pgDsnConfig(dsn);
  const user = c.user ? `${c.user}@` : '';
  const port = c.port ? `:${c.port}` : '';
  const db = c.database ? `/${c.database}` : '';
  return `${user}${c.host ?? ''}${port}${db}`;
}

/** Connection settings node-postgres takes, from either DSN form. */
export interface PgDsnConfig {
  connectionString?: string;
  host?: string;
  port?: number;
  user?: string;
  password?: string;
  database?: string;
  ssl?: boolean | { rejectUnauthorized: boolean };
  options?: string;
  application_name?: string;
}

const KEY_VALUE = /\s*(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']*)/y;

/**
 * node-postgres understands only the URL form; libpq's key=value form (`host=db user=berth ...`) is
 * parsed here into explicit settings.
 */
export function pgDsnConfig(dsn: string): PgDsnConfig {
  const trimmed = dsn.trim();
  if (PG_URL.test(trimmed)) return { connectionString: trimmed };
  const config: PgDsnConfig = {};
  let at = 0;
  while (at < trimmed.length) {
    KEY_VALUE.lastIndex = at;
    const m = KEY_VALUE.exec(trimmed);
    if (m === null)
      throw new Error(
        `invalid connection string near position ${at}: want key=value pairs or a postgres:// URL`,
      );
    at = KEY_VALUE.lastIndex;
    const key = m[1]!.toLowerCase();
    const raw = m[2]!;
    const value = raw.startsWith("'") ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw;
    switch (key) {
      case 'host':
      case 'hostaddr':
        config.host = value;
        break;
      case 'port':
        config.port = portOf(value);
        break;
      case 'user':
        config.user = value;
        break;
      case 'password':
        config.password = value;
        break;
      case 'dbname':
        config.database = value;
        break;
      case 'options':
        config.options = value;
        break;
      case 'application_name':
        config.application_name = value;
        break;
      case 'connect_timeout':
        break; // --sql-timeout bounds connecting
      case 'sslmode':
        if (value === 'disable') config.ssl = false;
        else if (value === 'require') config.ssl = { rejectUnauthorized: false };
        else if (value === 'verify-ca' || value === 'verify-full') config.ssl = { rejectUnauthorized: true };
        else
          throw new Error(
            `sslmode "${value}" is not supported (use disable, require, verify-ca or verify-full)`,
          );
        break;
      default:
        throw new Error(`connection string key "${key}" is not supported`);
    }
    while (at < trimmed.length && /\s/.test(trimmed[at]!)) at++;
  }
  return config;
}

function portOf(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65_535)
    throw new Error(`invalid port "${value}" in connection string`);
  return port;
}

// --- MySQL / MariaDB ------------------------------------------------------------------------------

/** Connection settings mysql2 takes. */
export interface MysqlDsnConfig {
  host?: string;
  port?: number;
  socketPath?: string;
  user?: string;
  password?: string;
  database?: string;
  ssl?: { rejectUnauthorized: boolean };
}

const UTC_ZONES = new Set(['UTC', '+00:00', '+0:00', '-00:00']);

/**
 * Parses either DSN form. The time parameters are checked because they decide how the Go server reads
 * the zoneless datetime(6) columns (#107/#191: a non-UTC `loc` made renewed leases read back as expired
 * early). This store always writes and reads those columns as UTC text, so any parameter asking for
 * another zone is intent it cannot honour and is refused rather than overridden.
 */
export function mysqlDsnConfig(dsn: string): MysqlDsnConfig {
  const { config, params } = parseMysqlDsn(dsn);
  for (const [key, value] of params) {
    switch (key) {
      case 'loc':
        if (value !== 'UTC')
          throw new Error(
            `mysql dsn loc=${JSON.stringify(value)} is not supported: lease timestamps are stored as zoneless ` +
              'datetime(6) and must round-trip in UTC; remove the loc parameter or set loc=UTC',
          );
        break;
      case 'time_zone':
        if (!UTC_ZONES.has(value.replace(/^'(.*)'$/, '$1').toUpperCase()))
          throw new Error(
            `mysql dsn time_zone=${JSON.stringify(value)} is not supported: lease timestamps are read and ` +
              "written in UTC; remove the time_zone parameter or set it to '+00:00'",
          );
        break;
      case 'parseTime': // the Go server forces it on; datetime columns are always decoded here
      case 'timeout': // --sql-timeout bounds connecting, statements and lock waits
      case 'readTimeout':
      case 'writeTimeout':
      case 'allowNativePasswords': // mysql2 always allows them
        break;
      case 'charset':
        if (!value.split(',').includes('utf8mb4'))
          throw new Error(
            `mysql dsn charset=${JSON.stringify(value)} is not supported: the store uses utf8mb4`,
          );
        break;
      case 'tls':
        if (value === 'true') config.ssl = { rejectUnauthorized: true };
        else if (value === 'skip-verify') config.ssl = { rejectUnauthorized: false };
        else if (value !== 'false')
          throw new Error(
            `mysql dsn tls=${JSON.stringify(value)} is not supported (use true, skip-verify or false)`,
          );
        break;
      default:
        throw new Error(`mysql dsn parameter "${key}" is not supported`);
    }
  }
  return config;
}

type Params = Array<[string, string]>;

function parseMysqlDsn(dsn: string): { config: MysqlDsnConfig; params: Params } {
  const trimmed = dsn.trim();
  return /^mysql:\/\//i.test(trimmed) ? mysqlUrl(trimmed) : goMysqlDsn(trimmed);
}

function mysqlUrl(dsn: string): { config: MysqlDsnConfig; params: Params } {
  let url: URL;
  try {
    url = new URL(dsn);
  } catch {
    throw new Error('invalid mysql:// URL');
  }
  return {
    config: {
      host: url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
      port: url.port ? portOf(url.port) : 3306,
      user: url.username ? decodeURIComponent(url.username) : undefined,
      password: url.password ? decodeURIComponent(url.password) : undefined,
      database: decodeURIComponent(url.pathname.replace(/^\//, '')) || undefined,
    },
    params: [...url.searchParams],
  };
}

/** `[user[:password]@][net[(addr)]]/dbname[?params]`, split the way the Go driver does. */
function goMysqlDsn(dsn: string): { config: MysqlDsnConfig; params: Params } {
  const slash = dsn.lastIndexOf('/');
  if (slash < 0)
    throw new Error('invalid mysql dsn: want user:password@tcp(host:port)/dbname or a mysql:// URL');
  const head = dsn.slice(0, slash);
  const [database, query = ''] = splitOnce(dsn.slice(slash + 1), '?');
  const at = head.lastIndexOf('@');
  const [user, password] = at < 0 ? [undefined, undefined] : splitOnce(head.slice(0, at), ':');
  const net = /^(?:(\w+)(?:\((.*)\))?)?$/.exec(at < 0 ? head : head.slice(at + 1));
  if (net === null) throw new Error('invalid mysql dsn: want tcp(host:port) or unix(/path) before the /');
  const config: MysqlDsnConfig = { user: user || undefined, password, database: database || undefined };
  const [protocol = 'tcp', address] = [net[1], net[2]];
  if (protocol === 'unix') config.socketPath = address || '/tmp/mysql.sock';
  else if (protocol === 'tcp') {
    const m = /^(?:\[([^\]]+)\]|([^:]*))(?::(\d+))?$/.exec(address ?? '');
    if (m === null) throw new Error('invalid mysql dsn address: want host:port');
    config.host = m[1] ?? (m[2] || '127.0.0.1');
    config.port = m[3] === undefined ? 3306 : portOf(m[3]);
  } else throw new Error(`mysql dsn network "${protocol}" is not supported (use tcp or unix)`);
  const params = query
    .split('&')
    .filter((p) => p !== '')
    .map((p): [string, string] => {
      const [k, v = ''] = splitOnce(p, '=');
      return [k, decodeURIComponent(v.replaceAll('+', ' '))];
    });
  return { config, params };
}

function splitOnce(text: string, sep: string): [string, string | undefined] {
  const i = text.indexOf(sep);
  return i < 0 ? [text, undefined] : [text.slice(0, i), text.slice(i + sep.length)];
}

// --- SQLite ---------------------------------------------------------------------------------------

export interface SqliteDsnConfig {
  /** What node:sqlite opens: `:memory:` or a file: URL (absolute, with the mode parameter if given). */
  location: string | URL;
  memory: boolean;
  describe: string;
}

/**
 * A path, `:memory:`, or a `file:` URI as the Go server's driver takes them. Of its URI parameters,
 * `mode` (rw, rwc, memory) is passed to SQLite, `cache` and `_txlock` do not matter with the store's
 * single connection (writes always BEGIN IMMEDIATE), and `_pragma` may only repeat what the store sets
 * itself (journal_mode WAL; busy_timeout, which --sql-timeout decides).
 */
export function sqliteDsnConfig(dsn: string): SqliteDsnConfig {
  const trimmed = dsn.trim();
  if (trimmed === '') throw new Error('empty sqlite dsn');
  if (trimmed === ':memory:') return { location: ':memory:', memory: true, describe: ':memory:' };
  if (!/^file:/i.test(trimmed)) {
    const path = resolve(trimmed);
    return { location: pathToFileURL(path), memory: false, describe: path };
  }
  const [rawPath, query = ''] = splitOnce(trimmed.slice('file:'.length), '?');
  let mode: string | undefined;
  for (const [key, value] of new URLSearchParams(query)) {
    if (key === 'mode') {
      if (value === 'ro') throw new Error('sqlite dsn mode=ro is not supported: the lease store writes');
      if (!['rw', 'rwc', 'memory'].includes(value))
        throw new Error(`sqlite dsn mode=${JSON.stringify(value)} is not supported (use rw, rwc or memory)`);
      mode = value;
    } else if (key === '_pragma') {
      const pragma = value.replace(/\s/g, '').toLowerCase();
      if (!/^busy_timeout\(\d+\)$/.test(pragma) && pragma !== 'journal_mode(wal)')
        throw new Error(
          `sqlite dsn _pragma=${JSON.stringify(value)} is not supported: the store sets journal_mode WAL, synchronous FULL and an exclusive lock itself`,
        );
    } else if (key !== 'cache' && key !== '_txlock')
      throw new Error(`sqlite dsn parameter "${key}" is not supported`);
  }
  // file:///abs, file://localhost/abs, file:/abs and file:relative
  const path = decodeURIComponent(rawPath.replace(/^\/\/(localhost)?(?=\/)/i, ''));
  if (mode === 'memory' || path === ':memory:' || path === '')
    return { location: ':memory:', memory: true, describe: ':memory:' };
  const absolute = resolve(path);
  const location = pathToFileURL(absolute);
  if (mode !== undefined) location.searchParams.set('mode', mode);
  return { location, memory: false, describe: absolute };
}
