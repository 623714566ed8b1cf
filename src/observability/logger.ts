// pino logging: JSON lines, or logfmt lines with `format: 'text'`. Secrets never reach the output:
// fields whose names mark them as credentials are replaced, and bearer/basic credentials, JWTs and PEM
// private keys are masked inside any string (messages, fields, error messages and stacks), because API
// errors echo headers and bodies verbatim.
import { type DestinationStream, type Logger, type LoggerOptions, pino } from 'pino';

export type { Logger } from 'pino';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const LOG_FORMATS = ['json', 'text'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const REDACTED = '[REDACTED]';

export interface CreateLoggerOptions {
  level?: LogLevel;
  /** `json` (default) or `text`, see formatTextLine. */
  format?: LogFormat;
  /** Added to every line as `logger`. */
  name?: string;
  /** Where lines go; defaults to stdout. Tests pass an in-memory stream. */
  destination?: DestinationStream;
}

// Field names (lower-cased, without '-', '_' and '.') whose values are credentials. `fencingToken`,
// `continueToken` and the like stay visible: they are not secrets and are needed for debugging.
const SECRET_FIELDS = new Set([
  'authorization',
  'proxyauthorization',
  'cookie',
  'setcookie',
  'password',
  'passphrase',
  'secret',
  'clientsecret',
  'token',
  'accesstoken',
  'bearertoken',
  'refreshtoken',
  'idtoken',
  'authtoken',
  'apikey',
  'key',
  'clientkey',
  'clientkeydata',
  'keydata',
  'tlskey',
]);

export function isSecretField(name: string): boolean {
  const lower = name.toLowerCase();
  if (lower.endsWith('.key') || lower.endsWith('privatekey')) return true;
  return SECRET_FIELDS.has(lower.replace(/[-_.]/g, ''));
}

const PRIVATE_KEY = '-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----';
const PRIVATE_KEY_END = '-----END \\1PRIVATE KEY-----';
const MASKED_KEY = '[REDACTED PRIVATE KEY]';

const TOKEN_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [/\b(Bearer|Basic)\s+[A-Za-z0-9\-._~+/]+=*/gi, `$1 ${REDACTED}`],
  // JWTs (service-account tokens) appear without a scheme in kubeconfigs and token files.
  [/\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g, REDACTED],
];

// In free text a key without its END line is masked to the end of the string; inside a serialized
// JSON line only to the end of the JSON string (escape pairs are skipped), so the line stays valid.
const TEXT_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [new RegExp(`${PRIVATE_KEY}[\\s\\S]*?(?:${PRIVATE_KEY_END}|$)`, 'g'), MASKED_KEY],
  ...TOKEN_PATTERNS,
];
const JSON_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [new RegExp(`${PRIVATE_KEY}(?:[^"\\\\]|\\\\.)*?(?:${PRIVATE_KEY_END}|(?="))`, 'g'), MASKED_KEY],
  ...TOKEN_PATTERNS,
];

function replaceAll(text: string, patterns: ReadonlyArray<[RegExp, string]>): string {
  let out = text;
  for (const [pattern, replacement] of patterns) out = out.replace(pattern, replacement);
  return out;
}

/** Masks credentials inside free text. */
export function scrubSecrets(text: string): string {
  return replaceAll(text, TEXT_PATTERNS);
}

/** Masks credentials inside one serialized JSON log line, keeping it valid JSON. */
export function scrubJsonLine(line: string): string {
  return replaceAll(line, JSON_PATTERNS);
}

const MAX_DEPTH = 8;

/**
 * Returns `value` with secret fields replaced and secret-looking strings masked. Copy-on-write: the
 * input is never mutated and is returned as-is when nothing needed masking. Errors are turned into
 * pino's serialized form first so their message and stack are scrubbed too.
 */
export function redactSecrets(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubSecrets(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '[Truncated]';
  if (value instanceof Error) return redactSecrets(pino.stdSerializers.err(value), depth);
  if (Array.isArray(value)) {
    let changed = false;
    const out = value.map((v) => {
      const r = redactSecrets(v, depth + 1);
      if (r !== v) changed = true;
      return r;
    });
    return changed ? out : value;
  }
  if (value instanceof Date || ArrayBuffer.isView(value)) return value;
  let out: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(value)) {
    const r = isSecretField(k) ? redactValue(v) : redactSecrets(v, depth + 1);
    if (r !== v) {
      out ??= { ...value };
      out[k] = r;
    }
  }
  return out ?? value;
}

// Spellings of secret field names likely to be used as child-logger bindings.
const TOP_LEVEL_SECRET_KEYS = [
  'authorization',
  'Authorization',
  'token',
  'accessToken',
  'bearerToken',
  'password',
  'secret',
  'key',
  'privateKey',
  'apiKey',
  'cookie',
];

const redactValue = (value: unknown): unknown =>
  value === undefined || value === null || value === '' ? value : REDACTED;

const asRecord = (value: unknown): Record<string, unknown> => value as Record<string, unknown>;

export function createLogger(options: CreateLoggerOptions = {}): Logger {
  const config: LoggerOptions = {
    level: options.level ?? 'info',
    base: options.name === undefined ? {} : { logger: options.name },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      // Level names, not numbers, for humans and log pipelines alike.
      level: (label) => ({ level: label }),
      log: (object) => asRecord(redactSecrets(object)),
    },
    serializers: {
      // formatters.log has already turned errors into scrubbed plain objects; pino's default err
      // serializer would re-wrap those as type "Object", so this one only re-checks them.
      err: (err: unknown) => redactSecrets(err),
      // Child-logger bindings bypass formatters.log too, but serializers still apply to them by key.
      ...Object.fromEntries(TOP_LEVEL_SECRET_KEYS.map((key) => [key, redactValue])),
    },
    // The message (printf arguments, or err.message taken by pino) and child bindings bypass
    // formatters.log; scrubbing the finished line catches every string, whatever path it took.
    hooks: { streamWrite: scrubJsonLine },
  };
  const destination =
    options.format === 'text'
      ? textDestination(options.destination ?? pino.destination(1))
      : options.destination;
  return destination === undefined ? pino(config) : pino(config, destination);
}

// Go's slog text handler quotes a value that is empty or holds a space, '"', '=', a backslash or a
// non-printable character; JSON string syntax escapes newlines, so a record stays on one line.
const NEEDS_QUOTES = /[\s"=\\\p{C}]/u;

function textValue(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text === '' || NEEDS_QUOTES.test(text) ? JSON.stringify(text) : text;
}

function textFields(key: string, value: unknown): string[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return [`${key}=${textValue(value)}`];
  return Object.entries(value).flatMap(([k, v]) => textFields(`${key}.${k}`, v));
}

/**
 * One JSON log line as a logfmt line shaped like Go's slog text handler (`time=… level=INFO msg=…`,
 * then the fields, nested objects as dotted keys). A line that is not a JSON object passes unchanged.
 * It formats the line pino has already scrubbed, so redaction holds for both formats.
 */
export function formatTextLine(line: string): string {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return line;
  const { time, level, msg, ...fields } = entry as Record<string, unknown>;
  const head = [
    ...(time === undefined ? [] : [`time=${textValue(time)}`]),
    ...(level === undefined ? [] : [`level=${textValue(String(level).toUpperCase())}`]),
    ...(msg === undefined ? [] : [`msg=${textValue(msg)}`]),
  ];
  const tail = Object.entries(fields).flatMap(([k, v]) => textFields(k, v));
  return `${[...head, ...tail].join(' ')}\n`;
}

/** A pino destination writing every record to `out` as a text line (formatTextLine). */
export function textDestination(out: DestinationStream): DestinationStream {
  return { write: (line: string) => out.write(formatTextLine(line)) };
}

export interface ReconcileLogContext {
  controller?: string;
  namespace?: string;
  name?: string;
  reconcileID?: string;
}

/** A child logger carrying controller-runtime's per-reconcile fields; unset fields are left out. */
export function childLogger(parent: Logger, context: ReconcileLogContext): Logger {
  const bindings: Record<string, string> = {};
  for (const key of ['controller', 'namespace', 'name', 'reconcileID'] as const) {
    const value = context[key];
    if (value !== undefined && value !== '') bindings[key] = value;
  }
  return parent.child(bindings);
}
