// PostgreSQL connection strings in logs and errors: never with their password. Both libpq forms are
// handled: URLs (`postgres://user:secret@host/db`) and key=value (`host=h password=secret`).

const REDACTED = '***';

/** The DSN with any password replaced by `***` (also `password=` query parameters). */
export function redactDsn(dsn: string): string {
  const trimmed = dsn.trim();
  if (/^postgres(ql)?:\/\//i.test(trimmed)) {
    return trimmed
      .replace(/^([a-z]+:\/\/[^:@/?#]*):[^@/?#]*@/i, `$1:${REDACTED}@`)
      .replace(/([?&]password=)[^&#]*/gi, `$1${REDACTED}`);
  }
  // key=value: values may be single-quoted with backslash escapes.
  return trimmed.replace(/(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)/gi, `$1${REDACTED}`);
}

/** `user@host:port/database` for logs; undefined parts are left out. */
export function describeDsn(dsn: string): string {
  const trimmed = dsn.trim();
  if (/^postgres(ql)?:\/\//i.test(trimmed)) {
    try {
      const url = new URL(trimmed);
      const user = url.username ? `${decodeURIComponent(url.username)}@` : '';
      return `${user}${url.host}${url.pathname}`;
    } catch {
      return '(unparsable URL)';
    }
  }
  const fields = new Map<string, string>();
  for (const m of trimmed.matchAll(/(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)/g))
    fields.set(m[1]!.toLowerCase(), m[2]!.replace(/^'|'$/g, ''));
  const user = fields.has('user') ? `${fields.get('user')}@` : '';
  const port = fields.has('port') ? `:${fields.get('port')}` : '';
  const db = fields.has('dbname') ? `/${fields.get('dbname')}` : '';
  return `${user}${fields.get('host') ?? ''}${port}${db}`;
}

/** Connection settings node-postgres takes, from either DSN form. */
export interface DsnConfig {
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
 * parsed here into explicit settings. Keys with no safe equivalent are refused rather than ignored.
 */
export function dsnConfig(dsn: string): DsnConfig {
  const trimmed = dsn.trim();
  if (/^postgres(ql)?:\/\//i.test(trimmed)) return { connectionString: trimmed };
  const config: DsnConfig = {};
  KEY_VALUE.lastIndex = 0;
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
      case 'port': {
        const port = Number(value);
        if (!Number.isInteger(port) || port < 1 || port > 65_535)
          throw new Error(`invalid port "${value}" in connection string`);
        config.port = port;
        break;
      }
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
