// The helper's log: JSON lines shaped like the operator's (level name, ISO time, msg, fields) on stdout.
// Not the operator's pino logger: the helper runs twice in every opted-in Pod and pino costs it about
// 8 MiB of RSS (docs/helper.md §6). The helper logs no credential: tokens are never a field, and the
// lease client's error messages carry the server's answer, not the request's headers.
export type LogFields = Record<string, unknown>;
export type HelperLogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface HelperLog {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** A log whose lines all carry `fields`. */
  with(fields: LogFields): HelperLog;
}

const RANK: Record<HelperLogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

export interface HelperLogOptions {
  level?: HelperLogLevel;
  write?: (line: string) => void;
  now?: () => number;
}

const plain = (value: unknown): unknown => (value instanceof Error ? value.message : value);

export function createHelperLog(options: HelperLogOptions = {}, bound: LogFields = {}): HelperLog {
  const min = RANK[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stdout.write(line));
  const now = options.now ?? Date.now;
  const emit =
    (level: HelperLogLevel) =>
    (msg: string, fields: LogFields = {}): void => {
      if (RANK[level] < min) return;
      const record: LogFields = { level, time: new Date(now()).toISOString(), msg };
      for (const [k, v] of Object.entries({ ...bound, ...fields })) record[k] = plain(v);
      write(`${JSON.stringify(record)}\n`);
    };
  return {
    debug: emit('debug'),
    info: emit('info'),
    warn: emit('warn'),
    error: emit('error'),
    with: (fields) => createHelperLog(options, { ...bound, ...fields }),
  };
}
