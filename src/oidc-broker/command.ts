// `berth-operator oidc-broker`: the OAuth2 client-credentials token broker, run as a sidecar that writes the
// bearer token file the operator (BERTH_API_KEY_FILE) or a helper re-reads (docs/oidc-broker.md). The Go
// broker's flags, defaults and exit codes: 2 for a bad flag, a bad combination or an unusable secret file
// (one line on stderr), 1 when the issuer's discovery fails at start-up, 0 after SIGTERM/SIGINT. main.ts
// loads this module before anything else, so the broker never loads the Kubernetes client, zod or pino.
import { readFile } from 'node:fs/promises';
import { type FlagValues, formatDuration, helpText, parseFlags, UsageError } from '../cli.ts';
import { createHelperLog, type HelperLog } from '../helper/log.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import { type BrokerConfig, brokerConfig, secretFromFile } from './config.ts';
import { runBrokerLoop } from './loop.ts';
import { writeTokenAtomic } from './output.ts';
import { OIDC_BROKER_COMMAND, oidcBrokerCommand } from './spec.ts';
import {
  ClientCredentials,
  discoverTokenEndpoint,
  failureReason,
  queryEscape,
  type Transport,
} from './token.ts';
import { httpsTransport } from './transport.ts';

const PROGRAM = 'berth-operator';

/** The bound of the start-up discovery request, as in the Go broker. */
export const DISCOVERY_TIMEOUT_MS = 30_000;
export const REDACTED = '[REDACTED]';

export interface BrokerIO {
  stdout(text: string): void;
  stderr(text: string): void;
  transport: Transport;
  clock: Clock;
  /** Calls `stop` on SIGTERM or SIGINT; returns the unsubscribe. */
  onShutdown(stop: () => void): () => void;
}

const processIO = (): BrokerIO => ({
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  transport: httpsTransport(),
  clock: realClock,
  onShutdown(stop) {
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    return () => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
    };
  },
});

/**
 * Replaces every known credential in a line: the client secret (as given, JSON-escaped and form-escaped)
 * and the last tokens written. The broker never puts them in a line on purpose; this holds for messages
 * that echo what an endpoint or the system said.
 */
export class Redactor {
  readonly #secrets: string[] = [];
  #tokens: string[] = [];

  addSecret(secret: string): void {
    for (const form of [secret, JSON.stringify(secret).slice(1, -1), queryEscape(secret)])
      if (form !== '' && !this.#secrets.includes(form)) this.#secrets.push(form);
  }

  /** The current token and the one before it (a reader may still hold it). */
  addToken(token: string): void {
    if (token !== '') this.#tokens = [token, ...this.#tokens.filter((t) => t !== token)].slice(0, 2);
  }

  redact(line: string): string {
    let out = line;
    // Longest first, so a secret containing another is masked whole.
    for (const value of [...this.#secrets, ...this.#tokens].sort((a, b) => b.length - a.length))
      out = out.replaceAll(value, REDACTED);
    return out;
  }
}

export async function runOidcBroker(args: string[], io: BrokerIO = processIO()): Promise<number> {
  const redactor = new Redactor();
  const fail = (message: string, code: number): number => {
    io.stderr(redactor.redact(`${PROGRAM}: ${OIDC_BROKER_COMMAND}: ${message}\n`));
    return code;
  };
  if (args.includes('--help') || args.includes('-h')) {
    io.stdout(helpText(PROGRAM, oidcBrokerCommand));
    return 0;
  }
  let config: BrokerConfig;
  try {
    const flags: FlagValues = parseFlags(oidcBrokerCommand, args);
    config = brokerConfig(flags);
  } catch (err) {
    if (err instanceof UsageError) return fail(err.message.replace(`${OIDC_BROKER_COMMAND}: `, ''), 2);
    throw err;
  }
  if (config.clientSecret !== '') redactor.addSecret(config.clientSecret);
  const log: HelperLog = createHelperLog({
    write: (line) => io.stdout(redactor.redact(line)),
    now: () => io.clock.now(),
  });
  if (config.clientSecret !== '')
    log.warn(
      '--oidc-client-secret passes the client secret on the command line, where it is visible in process listings (ps, /proc/<pid>/cmdline); prefer --oidc-client-secret-file',
    );

  let secret = config.clientSecret;
  if (secret === '') {
    try {
      secret = secretFromFile(config.clientSecretFile, await readFile(config.clientSecretFile, 'utf8'));
    } catch (err) {
      if (err instanceof UsageError) return fail(err.message, 2);
      return fail(`read client secret file "${config.clientSecretFile}": ${failureReason(err)}`, 2);
    }
    redactor.addSecret(secret);
  }

  const stop = new AbortController();
  const unsubscribe = io.onShutdown(() => stop.abort(new Error('shutting down')));
  try {
    let tokenUrl = config.tokenUrl;
    if (tokenUrl === '') {
      try {
        tokenUrl = await discoverTokenEndpoint(
          config.issuerUrl,
          io.transport,
          AbortSignal.any([stop.signal, AbortSignal.timeout(DISCOVERY_TIMEOUT_MS)]),
        );
      } catch (err) {
        if (stop.signal.aborted) return 0;
        return fail(`resolve token endpoint: ${failureReason(err)}`, 1);
      }
    }
    const client = new ClientCredentials(
      tokenUrl,
      { clientId: config.clientId, clientSecret: secret, scopes: config.scopes, audience: config.audience },
      io.transport,
      io.clock,
    );
    log.info('token broker starting', {
      token_url: tokenUrl,
      output: config.outputPath,
      refresh_skew: formatDuration(config.refreshSkewMs),
      min_refresh: formatDuration(config.minRefreshMs),
      fetch_timeout: formatDuration(config.fetchTimeoutMs),
      max_retry_interval: formatDuration(config.maxRetryMs),
    });
    await runBrokerLoop({
      config,
      fetchToken: (signal) => client.token(signal),
      writeToken: async (path, token) => {
        redactor.addToken(token);
        await writeTokenAtomic(path, token);
      },
      clock: io.clock,
      log,
      signal: stop.signal,
    });
    log.info('token broker stopped');
    return 0;
  } finally {
    unsubscribe();
  }
}
