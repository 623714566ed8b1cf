// `berth-operator central`: the embedded central lease API server (reference/berth-spec.md §3.9 flags,
// HTTPS only), running until SIGINT/SIGTERM; SIGHUP reloads the static key file. `--store-backend`
// picks the lease store (mem, postgres, k8s); a flag of another backend than the chosen one is a
// start-up error, as in the Go server.
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { type CommandSpec, type FlagValues, parseDuration, UsageError } from '../cli.ts';
import { parseBindAddress } from '../observability/health.ts';
import { createLogger, LOG_LEVELS, type Logger } from '../observability/logger.ts';
import { AUTH_MODES, type AuthMode } from './auth.ts';
import { DEFAULT_COORDINATION_BURST, DEFAULT_COORDINATION_QPS } from './k8sstore.ts';
import { openStore, STORE_BACKENDS, type StoreBackend, type StoreConfig } from './open-store.ts';
import { DEFAULT_POOL_MAX, MIGRATE_MODES, type MigrateMode } from './postgres/store.ts';
import { type CentralServer, startCentralServer } from './server.ts';

export const centralCommand: CommandSpec = {
  name: 'central',
  summary:
    'Run the central Berth lease API server (memory, PostgreSQL or Kubernetes Lease store) until interrupted.',
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
      help: 'none or static-keys; empty means none with --store-backend mem, static-keys otherwise',
    },
    {
      name: 'api-keys-file',
      kind: 'string',
      default: '',
      help: 'static-keys: file of <key-id>:<sha256-hex-of-token> lines; reloaded on SIGHUP',
    },
    {
      name: 'metrics-addr',
      kind: 'string',
      default: ':8080',
      help: 'Plain-HTTP address for /metrics and /healthz; empty disables it',
    },
    { name: 'log-level', kind: 'string', default: 'info', help: 'debug, info, warn or error' },
    {
      name: 'store-backend',
      kind: 'string',
      default: 'mem',
      help: 'Lease store: mem (one process, lost on restart), postgres or k8s (coordination.k8s.io Leases)',
    },
    {
      name: 'sql-dsn',
      kind: 'string',
      default: '',
      help: 'postgres: libpq connection string (URL or key=value); prefer --sql-dsn-file, flags show in ps',
    },
    {
      name: 'sql-dsn-file',
      kind: 'string',
      default: '',
      help: 'postgres: file holding the connection string',
    },
    {
      name: 'sql-migrate',
      kind: 'string',
      default: 'auto',
      help: 'postgres: auto creates table berth_leases if absent; off only verifies it, refusing to start on a mismatch',
    },
    {
      name: 'sql-max-conns',
      kind: 'number',
      default: DEFAULT_POOL_MAX,
      help: 'postgres: connection pool size',
    },
    {
      name: 'sql-timeout',
      kind: 'duration',
      default: '5s',
      help: 'postgres: bound of every wait (pool checkout, statement and lock timeouts)',
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
  postgres: ['sql-dsn', 'sql-dsn-file', 'sql-migrate', 'sql-max-conns', 'sql-timeout'],
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

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

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
    'metrics-addr': bindAddress(true),
    'log-level': z.enum(LOG_LEVELS),
    'store-backend': z.enum(STORE_BACKENDS, { error: `must be one of: ${STORE_BACKENDS.join(', ')}` }),
    'sql-dsn': z.string(),
    'sql-dsn-file': z.string(),
    'sql-migrate': z.enum(MIGRATE_MODES as [MigrateMode, ...MigrateMode[]], {
      error: `must be one of: ${MIGRATE_MODES.join(', ')}`,
    }),
    'sql-max-conns': z
      .number()
      .int('must be a whole number')
      .min(1, 'must be at least 1')
      .max(1_000, 'must be at most 1000'),
    'sql-timeout': z.number().positive('must be positive'),
    'coordination-kubeconfig': z.string(),
    'coordination-namespace': z
      .string()
      .refine((v) => v === '' || DNS_LABEL.test(v), { message: 'must be a namespace name (RFC 1123 label)' }),
    'coordination-qps': z.number().min(0, 'must be at least 0 (0 disables the limit)'),
    'coordination-burst': z.number().int('must be a whole number').min(1, 'must be at least 1'),
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
    if (backend === 'postgres') {
      if (flags['sql-dsn'] === '' && flags['sql-dsn-file'] === '')
        ctx.addIssue({
          code: 'custom',
          path: ['sql-dsn'],
          message: 'or --sql-dsn-file is required with --store-backend postgres',
        });
      if (flags['sql-dsn'] !== '' && flags['sql-dsn-file'] !== '')
        ctx.addIssue({
          code: 'custom',
          path: ['sql-dsn'],
          message: 'and --sql-dsn-file are mutually exclusive',
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
    if (mode === 'none' && flags['api-keys-file'] !== '')
      ctx.addIssue({
        code: 'custom',
        path: ['api-keys-file'],
        message: 'is only used with --auth-mode static-keys (the auth mode is none)',
      });
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
    case 'postgres':
      return {
        backend: 'postgres',
        dsn: flags['sql-dsn'],
        dsnFile: flags['sql-dsn-file'],
        migrate: flags['sql-migrate'],
        maxConnections: flags['sql-max-conns'],
        timeoutMs: flags['sql-timeout'],
      };
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
  const logger = options.logger ?? createLogger({ name: 'central', level: config['log-level'] });
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
