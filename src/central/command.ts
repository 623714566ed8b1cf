// `berth-operator central`: the embedded central lease API server (reference/berth-spec.md §3.9 flags,
// HTTPS only), running until SIGINT/SIGTERM; SIGHUP reloads the static key file.
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { type CommandSpec, type FlagValues, UsageError } from '../cli.ts';
import { parseBindAddress } from '../observability/health.ts';
import { createLogger, LOG_LEVELS, type Logger } from '../observability/logger.ts';
import { AUTH_MODES, type AuthMode } from './auth.ts';
import { type CentralServer, startCentralServer } from './server.ts';

export const centralCommand: CommandSpec = {
  name: 'central',
  summary: 'Run the central Berth lease API server (in-memory store) until interrupted.',
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
      help: 'none or static-keys; empty means none (the in-memory store default)',
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
  ],
};

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
  })
  .superRefine((flags, ctx) => {
    const mode = flags['auth-mode'] === '' ? 'none' : flags['auth-mode'];
    if (mode === 'static-keys' && flags['api-keys-file'] === '')
      ctx.addIssue({
        code: 'custom',
        path: ['api-keys-file'],
        message: 'is required with --auth-mode static-keys',
      });
    if (mode === 'none' && flags['api-keys-file'] !== '')
      ctx.addIssue({
        code: 'custom',
        path: ['api-keys-file'],
        message: 'is only used with --auth-mode static-keys (the auth mode is none)',
      });
  });

export type CentralFlags = z.infer<typeof flagsSchema>;

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
  const server = await startCentralServer({
    listen: config['listen-addr'],
    tls: { cert, key },
    authMode: config['auth-mode'] === '' ? 'none' : config['auth-mode'],
    apiKeysFile: config['api-keys-file'] || undefined,
    metricsAddr: config['metrics-addr'],
    logger,
  });
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
