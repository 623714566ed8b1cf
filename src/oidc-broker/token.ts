// The OAuth2 client-credentials grant and the issuer discovery of the broker (docs/oidc-broker.md §1, §3),
// with the behaviour of Go's golang.org/x/oauth2 that the Go broker relies on: the client authenticates
// with HTTP Basic first and, if that request fails, with client_id/client_secret in the form, remembering
// the style that worked; the answer is JSON or form-encoded; `expires_in` is counted from the moment the
// answer arrives. Requests and answers go through a Transport (transport.ts), so the rules here are pure.
// Error messages carry the status and the OAuth error code and description, never a header, the request
// body or an answer's token.
import { endpointUrlProblem } from '../central/endpoint-url.ts';
import type { Clock } from '../kube/clock.ts';
import { tokenExpiry } from './schedule.ts';

export interface HttpAnswer {
  status: number;
  /** The Content-Type header ("" when absent). */
  contentType: string;
  body: string;
}

export interface HttpCall {
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  signal: AbortSignal;
}

export interface Transport {
  request(url: string, call: HttpCall): Promise<HttpAnswer>;
}

export interface ClientCredentialsConfig {
  clientId: string;
  clientSecret: string;
  scopes: readonly string[];
  /** Sent as the `audience` parameter when not empty. */
  audience: string;
}

/** Where the client's credentials go: an Authorization: Basic header, or the form body. */
export type AuthStyle = 'header' | 'params';

export interface FetchedToken {
  accessToken: string;
  /** Epoch ms of the broker's clock; undefined when the answer had no (or a zero) `expires_in`. */
  expiresAt: number | undefined;
}

export class TokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokenError';
  }
}

// Go's int32 expirationTime: larger values are clamped.
const MAX_EXPIRES_IN = 2_147_483_647;
const MAX_DESCRIPTION = 200;

/** Go's url.QueryEscape: every byte but A-Z a-z 0-9 - _ . ~ escaped, space as '+'. */
export function queryEscape(text: string): string {
  return encodeURIComponent(text)
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%20/g, '+');
}

/** The headers and form body of one client-credentials request. */
export function tokenRequest(
  config: ClientCredentialsConfig,
  style: AuthStyle,
): { headers: Record<string, string>; body: string } {
  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  if (config.scopes.length > 0) form.set('scope', config.scopes.join(' '));
  if (config.audience !== '') form.set('audience', config.audience);
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (style === 'header') {
    const pair = `${queryEscape(config.clientId)}:${queryEscape(config.clientSecret)}`;
    headers.authorization = `Basic ${Buffer.from(pair).toString('base64')}`;
  } else {
    form.set('client_id', config.clientId);
    if (config.clientSecret !== '') form.set('client_secret', config.clientSecret);
  }
  form.sort();
  return { headers, body: form.toString() };
}

const mediaType = (contentType: string): string => contentType.split(';')[0]!.trim().toLowerCase();
const isForm = (contentType: string): boolean =>
  ['application/x-www-form-urlencoded', 'text/plain'].includes(mediaType(contentType));

/** The answer's fields: a form body, else JSON (undefined when it is no JSON object). */
function answerFields(answer: HttpAnswer): Record<string, unknown> | undefined {
  if (isForm(answer.contentType)) return Object.fromEntries(new URLSearchParams(answer.body));
  try {
    const parsed: unknown = JSON.parse(answer.body);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function oauthError(status: number, fields: Record<string, unknown> | undefined): TokenError {
  const code = typeof fields?.error === 'string' ? fields.error : '';
  const raw = typeof fields?.error_description === 'string' ? fields.error_description : '';
  const description = raw.length > MAX_DESCRIPTION ? `${raw.slice(0, MAX_DESCRIPTION)}…` : raw;
  return new TokenError(
    `token endpoint answered ${status}${code ? ` ${JSON.stringify(code)}` : ''}${description ? ` ${JSON.stringify(description)}` : ''}`,
  );
}

/** JSON's expires_in: an integer or a string of one (Go's json.Number), absent/null meaning none. */
function jsonExpiresIn(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  const n = typeof value === 'string' && /^-?\d+$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n))
    throw new TokenError('token endpoint answer has an expires_in that is not an integer');
  return Math.min(n, MAX_EXPIRES_IN);
}

/** A form's expires_in as Go's strconv.Atoi reads it: anything else is 0 (no expiry). */
function formExpiresIn(value: unknown): number {
  return typeof value === 'string' && /^[+-]?\d+$/.test(value) ? Math.min(Number(value), MAX_EXPIRES_IN) : 0;
}

/** The access token and `expires_in` (seconds) of a token endpoint's answer; throws TokenError otherwise. */
export function parseTokenAnswer(answer: HttpAnswer): {
  accessToken: string;
  expiresInS: number | undefined;
} {
  const fields = answerFields(answer);
  if (answer.status < 200 || answer.status > 299) throw oauthError(answer.status, fields);
  if (fields === undefined) throw new TokenError('token endpoint answer is not a JSON object');
  if (typeof fields.error === 'string' && fields.error !== '') throw oauthError(answer.status, fields);
  const form = isForm(answer.contentType);
  const token = fields.access_token;
  if (token !== undefined && typeof token !== 'string')
    throw new TokenError('token endpoint answer has an access_token that is not a string');
  if (token === undefined || token === '') throw new TokenError('token endpoint answer lacks access_token');
  return {
    accessToken: token,
    expiresInS: form ? formExpiresIn(fields.expires_in) : jsonExpiresIn(fields.expires_in),
  };
}

/** Why a request failed, safe to log: the network cause, a timeout, or our own message. */
export function failureReason(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err.name === 'TimeoutError') return err.message || 'timed out';
  return err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : err.message;
}

/** The client-credentials grant against one token endpoint. */
export class ClientCredentials {
  readonly tokenUrl: string;
  readonly #config: ClientCredentialsConfig;
  readonly #transport: Transport;
  readonly #clock: Clock;
  #style: AuthStyle | undefined;

  constructor(tokenUrl: string, config: ClientCredentialsConfig, transport: Transport, clock: Clock) {
    this.tokenUrl = tokenUrl;
    this.#config = config;
    this.#transport = transport;
    this.#clock = clock;
  }

  /** The style that worked last, once one has. */
  get authStyle(): AuthStyle | undefined {
    return this.#style;
  }

  /** One grant: header auth first until a style has worked, then that style only. */
  async token(signal: AbortSignal): Promise<FetchedToken> {
    if (this.#style !== undefined) return this.#attempt(this.#style, signal);
    try {
      const token = await this.#attempt('header', signal);
      this.#style = 'header';
      return token;
    } catch (err) {
      if (signal.aborted) throw err;
      const token = await this.#attempt('params', signal);
      this.#style = 'params';
      return token;
    }
  }

  async #attempt(style: AuthStyle, signal: AbortSignal): Promise<FetchedToken> {
    const { headers, body } = tokenRequest(this.#config, style);
    const answer = await this.#transport.request(this.tokenUrl, { method: 'POST', headers, body, signal });
    const { accessToken, expiresInS } = parseTokenAnswer(answer);
    return { accessToken, expiresAt: tokenExpiry(this.#clock.now(), expiresInS) };
  }
}

/** `<issuer>/.well-known/openid-configuration`, a trailing slash of the issuer ignored. */
export function discoveryUrl(issuerUrl: string): string {
  return `${issuerUrl.replace(/\/$/, '')}/.well-known/openid-configuration`;
}

/** The token_endpoint of a discovery document; throws when it is malformed or names another issuer. */
export function tokenEndpointOf(document: unknown, issuerUrl: string): string {
  if (document === null || typeof document !== 'object') throw new Error('document is not a JSON object');
  const { issuer, token_endpoint } = document as Record<string, unknown>;
  if (issuer !== issuerUrl)
    throw new Error(`document names issuer ${JSON.stringify(issuer)}, want "${issuerUrl}"`);
  if (typeof token_endpoint !== 'string' || token_endpoint === '')
    throw new Error('document is missing token_endpoint');
  const problem = endpointUrlProblem(token_endpoint);
  if (problem !== undefined) throw new Error(`token_endpoint "${token_endpoint}" ${problem}`);
  return token_endpoint;
}

/** Fetches the discovery document and returns its token endpoint; the error names the URL. */
export async function discoverTokenEndpoint(
  issuerUrl: string,
  transport: Transport,
  signal: AbortSignal,
): Promise<string> {
  const url = discoveryUrl(issuerUrl);
  try {
    const answer = await transport.request(url, {
      method: 'GET',
      headers: { accept: 'application/json' },
      signal,
    });
    if (answer.status !== 200) throw new Error(`status ${answer.status}`);
    let document: unknown;
    try {
      document = JSON.parse(answer.body);
    } catch {
      throw new Error('document is not JSON');
    }
    return tokenEndpointOf(document, issuerUrl);
  } catch (err) {
    throw new Error(`discover ${url}: ${failureReason(err)}`);
  }
}
