// The broker's configuration from its parsed flags, and the pure rules of its start-up (docs/oidc-broker.md
// §1): which flags are required or exclusive, the bounds of the durations, the URL rule, the scopes. Every
// refusal is a UsageError: one line, exit code 2, as the Go broker's.

import { endpointUrlProblem } from '../central/endpoint-url.ts';
import { type FlagValues, UsageError } from '../cli.ts';

export interface LoopConfig {
  outputPath: string;
  /** How long before its declared expiry a token is refreshed (ms, >= 0). */
  refreshSkewMs: number;
  /** Lower bound of every wait between refreshes, and the first retry delay (ms, > 0). */
  minRefreshMs: number;
  /** Deadline of one token request (ms, > 0). */
  fetchTimeoutMs: number;
  /** Cap of the doubling retry delay (ms, >= minRefreshMs). */
  maxRetryMs: number;
}

export interface BrokerConfig extends LoopConfig {
  issuerUrl: string;
  /** Explicit token endpoint; empty means discovery from issuerUrl. */
  tokenUrl: string;
  clientId: string;
  /** The literal secret of --oidc-client-secret, or empty. */
  clientSecret: string;
  /** The file of --oidc-client-secret-file, or empty. */
  clientSecretFile: string;
  audience: string;
  scopes: string[];
}

/** Comma-separated scopes, each trimmed, empty entries dropped. */
export function parseScopes(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** Go's validateArgs and loopConfig.validate, in its order, then the URL rule. */
export function brokerConfig(flags: FlagValues): BrokerConfig {
  const str = (name: string): string => {
    const value = flags[name];
    return typeof value === 'string' ? value : '';
  };
  const ms = (name: string): number => {
    const value = flags[name];
    return typeof value === 'number' ? value : Number.NaN;
  };
  const config: BrokerConfig = {
    issuerUrl: str('oidc-issuer-url'),
    tokenUrl: str('oidc-token-url'),
    clientId: str('oidc-client-id'),
    clientSecret: str('oidc-client-secret'),
    clientSecretFile: str('oidc-client-secret-file'),
    audience: str('oidc-audience'),
    scopes: parseScopes(str('oidc-scopes')),
    outputPath: str('output'),
    refreshSkewMs: ms('refresh-skew'),
    minRefreshMs: ms('min-refresh-interval'),
    fetchTimeoutMs: ms('fetch-timeout'),
    maxRetryMs: ms('max-retry-interval'),
  };
  if (config.clientId === '') throw new UsageError('--oidc-client-id is required');
  if (config.outputPath === '') throw new UsageError('--output is required');
  if (config.issuerUrl === '' && config.tokenUrl === '')
    throw new UsageError('either --oidc-issuer-url or --oidc-token-url is required');
  if (config.clientSecret === '' && config.clientSecretFile === '')
    throw new UsageError('either --oidc-client-secret or --oidc-client-secret-file is required');
  if (config.clientSecret !== '' && config.clientSecretFile !== '')
    throw new UsageError('--oidc-client-secret and --oidc-client-secret-file are mutually exclusive');
  validateLoopConfig(config);
  for (const [flag, url] of [
    ['--oidc-issuer-url', config.issuerUrl],
    ['--oidc-token-url', config.tokenUrl],
  ] as const) {
    const problem = url === '' ? undefined : endpointUrlProblem(url);
    if (problem !== undefined) throw new UsageError(`${flag} "${url}" ${problem}`);
  }
  return config;
}

export function validateLoopConfig(config: LoopConfig): void {
  if (!(config.refreshSkewMs >= 0)) throw new UsageError('--refresh-skew must not be negative');
  if (!(config.fetchTimeoutMs > 0)) throw new UsageError('--fetch-timeout must be positive');
  if (!(config.minRefreshMs > 0)) throw new UsageError('--min-refresh-interval must be positive');
  if (!(config.maxRetryMs >= config.minRefreshMs))
    throw new UsageError('--max-retry-interval must be at least --min-refresh-interval');
}

/** The secret file's content, trimmed; throws (a start-up error, exit 2) when it is unreadable or empty. */
export function secretFromFile(path: string, content: string): string {
  const secret = content.trim();
  if (secret === '') throw new UsageError(`client secret file "${path}" is empty`);
  return secret;
}
