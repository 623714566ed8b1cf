// `berth-operator central`: the embedded central lease API server (docs/behaviour.md §3.9 flags,
// HTTPS only), running until SIGINT/SIGTERM; SIGHUP reloads the static key file. `--store-backend`
// picks the lease store (mem, k8s, sql with --sql-driver postgres|mysql|sqlite; docs/central-stores.md);
// a flag of another backend than the chosen one is a start-up error, as in the Go server.
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { type CommandSpec, type FlagValues, parseDuration, UsageError } from '../cli.ts';
import { isDnsLabel } from '../kube/names.ts';
import { parseBindAddress } from '../observability/health.ts';
import { createLogger, LOG_FORMATS, LOG_LEVELS, type Logger } from '../observability/logger.ts';
import { AUTH_MODES, type AuthMode } from './auth.ts';
import { DEFAULT_COORDINATION_BURST, DEFAULT_COORDINATION_QPS } from './k8sstore.ts';
import { endpointUrlProblem, type OidcConfig, parseRequiredClaims } from './oidc.ts';
import { openStore, STORE_BACKENDS, type StoreBackend, type StoreConfig } from './open-store.ts';
import { type CentralServer, startCentralServer } from './server.ts';
import { SQL_DRIVERS, type SqlDriver } from './sql/dialect.ts';
import { DEFAULT_POOL_MAX, MIGRATE_MODES, type MigrateMode } from './sql/store.ts';

export const centralCommand: CommandSpec = {
  name: 'central',
  summary:
    'Run the central Berth lease API server (memory, SQL or Kubernetes Lease store) until interrupted.',
  flags: [
    {
      name: 'listen-addr',
      kind: 'string',
      default: ':8443',
      help: 'Address ([host]:port) to serve the lease API on (HTTPS)',
    },
    {
      name: 'tls-cert-file',
      kind: 'string',
      default: '',
      help: 'PEM serving certificate (required)',
    },
    {
      name: 'tls-key-file',
      kind: 'string',
      default: '',
      help: 'PEM private key of the certificate (required)',
    },
    {
      name: 'auth-mode',
      kind: 'string',
      default: '',
      help: 'none, static-keys or oidc; empty means none with --store-backend mem, static-keys otherwise',
    },
    {
      name: 'api-keys-file',
      kind: 'string',
      default: '',
      help: 'static-keys: file of <key-id>:<sha256-hex-of-token> lines; reloaded on SIGHUP',
    },
    {
      name: 'oidc-issuer-url',
      kind: 'string',
      default: '',
      help: "oidc: issuer URL (https); must equal the tokens' iss and the discovery document's issuer (required)",
    },
    {
      name: 'oidc-audience',
      kind: 'string',
      default: '',
      help: "oidc: audience the tokens' aud must contain (required)",
    },
    {
      name: 'oidc-jwks-url',
      kind: 'string',
      default: '',
      help: 'oidc: JWKS URL to verify signatures with; when empty, the jwks_uri of <issuer>/.well-known/openid-configuration',
    },
    {
      name: 'oidc-username-claim',
      kind: 'string',
      default: 'sub',
      help: 'oidc: claim holding the username (the holder identity)',
    },
    {
      name: 'oidc-tenant-claim',
      kind: 'string',
      default: 'sub',
      help: "oidc: claim holding the tenant (a string, or an array's first element); holders must be <tenant> or <tenant>/...",
    },
    {
      name: 'oidc-required-claim',
      kind: 'string',
      default: undefined,
      repeatable: true,
      help: "oidc: key=value that the token's string claim key must equal",
    },
    {
      name: 'metrics-addr',
      kind: 'string',
      default: ':8080',
      help: 'Plain-HTTP address for /metrics and /healthz; empty disables it',
    },
    { name: 'log-level', kind: 'string', default: 'info', help: 'debug, info, warn or error' },
    {
      name: 'log-format',
      kind: 'string',
      default: 'json',
      help: "json or text (logfmt lines, as Go slog's)",
    },
    {
      name: 'store-backend',
      kind: 'string',
      default: '',
      help:
        'Lease store: mem (one process, lost on restart), k8s (coordination.k8s.io Leases) or sql (--sql-driver). ' +
        'Empty (deprecated, logged): k8s when --coordination-namespace is set, else mem. ' +
        'postgres (deprecated, logged) means sql with --sql-driver postgres',
    },
    {
      name: 'sql-driver',
      kind: 'string',
      default: '',
      help: 'sql: postgres, mysql (MySQL or MariaDB) or sqlite (one replica only) (required)',
    },
    {
      name: 'sql-dsn',
      kind: 'string',
      default: '',
      help:
        'sql: connection string: postgres:// URL or libpq key=value; user:pw@tcp(host:3306)/db or mysql:// URL; ' +
        'SQLite file path or file: URI. Prefer --sql-dsn-file, flags show in ps',
    },
    {
      name: 'sql-dsn-file',
      kind: 'string',
      default: '',
      help: 'sql: file holding the connection string, read once at start-up',
    },
    {
      name: 'sql-migrate',
      kind: 'string',
      default: 'auto',
      help: 'sql: auto creates table berth_leases if absent (and adds a missing version column); off only verifies it, refusing to start on a mismatch',
    },
    {
      name: 'sql-max-conns',
      kind: 'number',
      default: undefined,
      help: `sql: connection pool size (default ${DEFAULT_POOL_MAX}); sqlite uses one connection and refuses more`,
    },
    {
      name: 'sql-timeout',
      kind: 'duration',
      default: '5s',
      help: 'sql: bound of every wait (connecting, pool checkout, statements, lock waits; sqlite: busy timeout)',
    },
    {
      name: 'coordination-kubeconfig',
      kind: 'string',
      default: '',
      help: 'k8s: kubeconfig of the cluster holding the Lease objects; in-cluster when empty',
    },
    {
      name: 'coordination-namespace',
      kind: 'string',
      default: '',
      help: 'k8s: namespace of the Lease objects (required with --store-backend k8s)',
    },
    {
      name: 'coordination-qps',
      kind: 'number',
      default: DEFAULT_COORDINATION_QPS,
      help: "k8s: client-side request rate limit, requests/s (0 disables it; client-go's 5 throttled the Go server)",
    },
    {
      name: 'coordination-burst',
      kind: 'number',
      default: DEFAULT_COORDINATION_BURST,
      help: 'k8s: client-side request burst',
    },
  ],
};

/** The flags only one backend uses; giving one with another backend is a start-up error. */
const BACKEND_FLAGS: Record<Exclude<StoreBackend, 'mem'>, readonly string[]> = {
  sql: ['sql-driver', 'sql-dsn', 'sql-dsn-file', 'sql-migrate', 'sql-max-conns', 'sql-timeout'],
  k8s: ['coordination-kubeconfig', 'coordination-namespace', 'coordination-qps', 'coordination-burst'],
};

/** The parsed default of a flag (durations in ms), to tell whether a flag was given. */
function defaultOf(name: string): string | number | boolean | undefined {
  const flag = centralCommand.flags.find((f) => f.name === name)!;
  return flag.kind === 'duration' && typeof flag.default === 'string'
    ? parseDuration(flag.default)
    : flag.default;
}

/** Backend flags set (to a non-default value) although the chosen backend does not use them. */
export function foreignBackendFlags(
  backend: StoreBackend,
  flags: FlagValues,
): Array<{ flag: string; owner: StoreBackend }> {
  const found: Array<{ flag: string; owner: StoreBackend }> = [];
  for (const [owner, names] of Object.entries(BACKEND_FLAGS) as Array<[StoreBackend, readonly string[]]>) {
    if (owner === backend) continue;
    for (const name of names)
      if (flags[name] !== undefined && flags[name] !== defaultOf(name)) found.push({ flag: name, owner });
  }
  return found;
}

/** The OIDC flags with a scalar value; giving one with another auth mode is a start-up error. */
const OIDC_FLAGS = [
  'oidc-issuer-url',
  'oidc-audience',
  'oidc-jwks-url',
  'oidc-username-claim',
  'oidc-tenant-claim',
] as const;

type GivenStoreBackend = '' | StoreBackend | 'postgres';

/**
 * The backend `--store-backend` selects, and the deprecation to log. Unset, the Go server's legacy
 * rule applies (a coordination namespace means k8s, otherwise mem); `postgres`, this server's name
 * before the Go SQL backend was reproduced, is the same store as `sql --sql-driver postgres`.
 */
export function resolveStoreBackend(flags: {
  'store-backend': GivenStoreBackend;
  'sql-driver': SqlDriver | '';
  'coordination-namespace': string;
}): { backend: StoreBackend; driver: SqlDriver | ''; warning?: string } | { problem: string } {
  const driver = flags['sql-driver'];
  switch (flags['store-backend']) {
    case '': {
      const backend = flags['coordination-namespace'] === '' ? 'mem' : 'k8s';
      const why = backend === 'k8s' ? '--coordination-namespace is set' : '--coordination-namespace is empty';
      return {
        backend,
        driver,
        warning: `--store-backend is not set: using ${backend} because ${why}; this inference is deprecated, set --store-backend ${backend}`,
      };
    }
    case 'postgres':
      if (driver !== '' && driver !== 'postgres')
        return { problem: `${driver} contradicts --store-backend postgres (use --store-backend sql)` };
      return {
        backend: 'sql',
        driver: 'postgres',
        warning: '--store-backend postgres is deprecated: use --store-backend sql --sql-driver postgres',
      };
    default:
      return { backend: flags['store-backend'], driver };
  }
}

const bindAddress = (optional: boolean) =>
  z.string().refine(
    (v) => {
      try {
        return parseBindAddress(v) !== undefined || optional;
      } catch {
        return false;
      }
    },
    { message: optional ? 'want [host]:port or empty' : 'want [host]:port, e.g. ":8443"' },
  );

const flagsSchema = z
  .object({
    'listen-addr': bindAddress(false),
    'tls-cert-file': z.string().min(1, 'is required (the lease API is served over HTTPS only)'),
    'tls-key-file': z.string().min(1, 'is required (the lease API is served over HTTPS only)'),
    'auth-mode': z.union([z.literal(''), z.enum(AUTH_MODES as [AuthMode, ...AuthMode[]])], {
      error: `must be one of: ${AUTH_MODES.join(', ')}`,
    }),
    'api-keys-file': z.string(),
    'oidc-issuer-url': z.string(),
    'oidc-audience': z.string(),
    'oidc-jwks-url': z.string(),
    'oidc-username-claim': z.string().min(1, 'must not be empty'),
    'oidc-tenant-claim': z.string().min(1, 'must not be empty'),
    'oidc-required-claim': z.array(z.string()).superRefine((entries, ctx) => {
      try {
        parseRequiredClaims(entries);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
    'metrics-addr': bindAddress(true),
    'log-level': z.enum(LOG_LEVELS),
    'log-format': z.enum(LOG_FORMATS, { error: `must be one of: ${LOG_FORMATS.join(', ')}` }),
    'store-backend': z.enum(['', ...STORE_BACKENDS, 'postgres'], {
      error: `must be one of: ${STORE_BACKENDS.join(', ')}`,
    }),
    'sql-driver': z.union([z.literal(''), z.enum(SQL_DRIVERS)], {
      error: `must be one of: ${SQL_DRIVERS.join(', ')}`,
    }),
    'sql-dsn': z.string(),
    'sql-dsn-file': z.string(),
    'sql-migrate': z.enum(MIGRATE_MODES as [MigrateMode, ...MigrateMode[]], {
      error: `must be one of: ${MIGRATE_MODES.join(', ')}`,
    }),
    'sql-max-conns': z
      .number()
      .int('must be a whole number')
      .min(1, 'must be at least 1')
      .max(1_000, 'must be at most 1000')
      .optional(),
    'sql-timeout': z.number().positive('must be positive'),
    'coordination-kubeconfig': z.string(),
    'coordination-namespace': z
      .string()
      .refine((v) => v === '' || isDnsLabel(v), { message: 'must be a namespace name (RFC 1123 label)' }),
    'coordination-qps': z.number().min(0, 'must be at least 0 (0 disables the limit)'),
    'coordination-burst': z.number().int('must be a whole number').min(1, 'must be at least 1'),
  })
  .transform((flags, ctx) => {
    const resolved = resolveStoreBackend(flags);
    if ('problem' in resolved) {
      ctx.issues.push({ code: 'custom', path: ['sql-driver'], message: resolved.problem, input: flags });
      return z.NEVER;
    }
    return {
      ...flags,
      'store-backend': resolved.backend,
      'sql-driver': resolved.driver,
      storeBackendWarning: resolved.warning,
    };
  })
  .superRefine((flags, ctx) => {
    const backend = flags['store-backend'];
    for (const { flag, owner } of foreignBackendFlags(backend, flags)) {
      ctx.addIssue({
        code: 'custom',
        path: [flag],
        message: `is a ${owner} store flag, but --store-backend is ${backend}`,
      });
    }
    if (backend === 'sql') {
      if (flags['sql-driver'] === '')
        ctx.addIssue({
          code: 'custom',
          path: ['sql-driver'],
          message: `is required with --store-backend sql (${SQL_DRIVERS.join(', ')})`,
        });
      if (flags['sql-dsn'] === '' && flags['sql-dsn-file'] === '')
        ctx.addIssue({
          code: 'custom',
          path: ['sql-dsn'],
          message: 'or --sql-dsn-file is required with --store-backend sql',
        });
      if (flags['sql-dsn'] !== '' && flags['sql-dsn-file'] !== '')
        ctx.addIssue({
          code: 'custom',
          path: ['sql-dsn'],
          message: 'and --sql-dsn-file are mutually exclusive',
        });
      if (flags['sql-driver'] === 'sqlite' && (flags['sql-max-conns'] ?? 1) > 1)
        ctx.addIssue({
          code: 'custom',
          path: ['sql-max-conns'],
          message: 'must be 1 with --sql-driver sqlite: SQLite has one writer and the store one connection',
        });
    }
    if (backend === 'k8s' && flags['coordination-namespace'] === '')
      ctx.addIssue({
        code: 'custom',
        path: ['coordination-namespace'],
        message: 'is required with --store-backend k8s',
      });
    const mode = effectiveAuthMode(flags);
    if (mode === 'static-keys' && flags['api-keys-file'] === '')
      ctx.addIssue({
        code: 'custom',
        path: ['api-keys-file'],
        message:
          flags['auth-mode'] === ''
            ? `is required: the auth mode defaults to static-keys with --store-backend ${backend}`
            : 'is required with --auth-mode static-keys',
      });
    if (mode !== 'static-keys' && flags['api-keys-file'] !== '')
      ctx.addIssue({
        code: 'custom',
        path: ['api-keys-file'],
        message: `is only used with --auth-mode static-keys (the auth mode is ${mode})`,
      });
    if (mode === 'oidc') {
      for (const flag of ['oidc-issuer-url', 'oidc-audience'] as const)
        if (flags[flag] === '')
          ctx.addIssue({ code: 'custom', path: [flag], message: 'is required with --auth-mode oidc' });
      for (const flag of ['oidc-issuer-url', 'oidc-jwks-url'] as const) {
        const problem = flags[flag] === '' ? undefined : endpointUrlProblem(flags[flag]);
        if (problem !== undefined) ctx.addIssue({ code: 'custom', path: [flag], message: problem });
      }
    } else {
      const given: string[] = OIDC_FLAGS.filter((flag) => flags[flag] !== defaultOf(flag));
      if (flags['oidc-required-claim'].length > 0) given.push('oidc-required-claim');
      for (const flag of given)
        ctx.addIssue({
          code: 'custom',
          path: [flag],
          message: `is only used with --auth-mode oidc (the auth mode is ${mode})`,
        });
    }
  });

export type CentralFlags = z.infer<typeof flagsSchema>;

/** `--auth-mode`, or its default: none for the memory store, static-keys for the durable ones (§3.6). */
export function effectiveAuthMode(flags: Pick<CentralFlags, 'auth-mode' | 'store-backend'>): AuthMode {
  if (flags['auth-mode'] !== '') return flags['auth-mode'];
  return flags['store-backend'] === 'mem' ? 'none' : 'static-keys';
}

/** The store configuration the validated flags describe. */
export function storeConfigOf(flags: CentralFlags): StoreConfig {
  switch (flags['store-backend']) {
    case 'mem':
      return { backend: 'mem' };
    case 'sql': {
      const driver = flags['sql-driver'];
      if (driver === '') throw new Error('central: --sql-driver is required with --store-backend sql');
      return {
        backend: 'sql',
        driver,
        dsn: flags['sql-dsn'],
        dsnFile: flags['sql-dsn-file'],
        migrate: flags['sql-migrate'],
        maxConnections: flags['sql-max-conns'],
        timeoutMs: flags['sql-timeout'],
      };
    }
    case 'k8s':
      return {
        backend: 'k8s',
        kubeconfig: flags['coordination-kubeconfig'],
        namespace: flags['coordination-namespace'],
        qps: flags['coordination-qps'],
        burst: flags['coordination-burst'],
      };
  }
}

/** The OIDC settings the validated flags describe. */
export function oidcConfigOf(flags: CentralFlags): OidcConfig {
  return {
    issuerUrl: flags['oidc-issuer-url'],
    audience: flags['oidc-audience'],
    jwksUrl: flags['oidc-jwks-url'],
    usernameClaim: flags['oidc-username-claim'],
    tenantClaim: flags['oidc-tenant-claim'],
    requiredClaims: parseRequiredClaims(flags['oidc-required-claim']),
  };
}

/** Validates the parsed flags; throws a one-line UsageError naming the first bad flag. */
export function parseCentralFlags(flags: FlagValues): CentralFlags {
  const result = flagsSchema.safeParse(flags);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const flag = String(issue.path[0] ?? '');
  throw new UsageError(`central: --${flag} ${issue.message}`);
}

async function readPem(flag: string, path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new Error(`central: read ${flag} ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

export interface RunCentralOptions {
  logger?: Logger;
  /** Where flag errors go (default process.stderr). */
  stderr?: NodeJS.WritableStream;
  /** Resolves to stop the server; default: SIGINT or SIGTERM. */
  until?: Promise<void>;
  /** Called with the running server (tests). */
  onStarted?: (server: CentralServer) => void;
}

/**
 * The `central` subcommand: resolves with the exit code (2 for a bad flag, printed as one line);
 * startup failures (unreadable certificate, address in use) reject.
 */
export async function runCentral(flags: FlagValues, options: RunCentralOptions = {}): Promise<number> {
  let config: CentralFlags;
  try {
    config = parseCentralFlags(flags);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    (options.stderr ?? process.stderr).write(`berth-operator: ${err.message}\n`);
    return 2;
  }
  const logger =
    options.logger ??
    createLogger({ name: 'central', level: config['log-level'], format: config['log-format'] });
  if (config.storeBackendWarning !== undefined) logger.warn(config.storeBackendWarning);
  const [cert, key] = await Promise.all([
    readPem('--tls-cert-file', config['tls-cert-file']),
    readPem('--tls-key-file', config['tls-key-file']),
  ]);
  const store = await openStore(storeConfigOf(config), { logger });
  let server: CentralServer;
  try {
    server = await startCentralServer({
      listen: config['listen-addr'],
      tls: { cert, key },
      authMode: effectiveAuthMode(config),
      apiKeysFile: config['api-keys-file'] || undefined,
      oidc: oidcConfigOf(config),
      metricsAddr: config['metrics-addr'],
      store,
      logger,
    });
  } catch (err) {
    await store.close?.();
    throw err;
  }
  options.onStarted?.(server);
  const onHup = (): void => {
    logger.info('SIGHUP: reloading API keys');
    void server.reloadKeys();
  };
  process.on('SIGHUP', onHup);
  try {
    await (options.until ??
      new Promise<void>((resolve) => {
        const stop = (signal: NodeJS.Signals): void => {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
          logger.info({ signal }, 'shutting down');
          resolve();
        };
        process.on('SIGINT', stop);
        process.on('SIGTERM', stop);
      }));
  } finally {
    process.off('SIGHUP', onHup);
    await server.stop();
  }
  return 0;
}
