// Client of the central Berth lease API (docs/behaviour.md §3.2-§3.5): `POST
// /v1alpha1/namespaces/{ns}/leases/{name}/{acquire|renew|release}` with JSON bodies and a bearer token,
// over HTTPS with an optional extra CA bundle, SNI override or (development only) no verification.
// Every request is bounded by a per-request timeout and by the caller's AbortSignal.
import { readFile } from 'node:fs/promises';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { getCACertificates } from 'node:tls';
import { type Clock, realClock } from '../kube/clock.ts';
import type { Logger } from '../observability/logger.ts';

// The injected helper (src/helper/) runs this client in every opted-in Pod, so it loads nothing beyond
// Node's own modules and the clock: no zod (about 18 MiB of RSS), no pino at run time (docs/helper.md).

/** Per-request default (`client.DefaultTimeout`). */
export const CLIENT_DEFAULT_TIMEOUT_MS = 10_000;
/** Re-read cadence of a bearer token file (`tokenFileCacheTTL`). */
export const TOKEN_FILE_CACHE_TTL_MS = 1_000;

/** The answer to acquire and renew. Times are epoch ms; undefined when the server sent Go's zero time. */
export interface AcquireResult {
  acquired: boolean;
  /** Our holder when acquired; otherwise the current holder ("" when none). */
  holder: string;
  /** Token of the lease; when not acquired, the current holder's token (0 when absent). */
  fencingToken: number;
  expiresAt: number | undefined;
  acquiredAt: number | undefined;
}

export interface LeaseCallOptions {
  /** Aborts the call (the per-request timeout still applies). */
  signal?: AbortSignal;
  /** Overrides the client's per-request timeout for this call. */
  timeoutMs?: number;
}

/** What the reconciler needs from the central API (the Go `LeaseClient`). */
export interface LeaseClient {
  acquire(
    namespace: string,
    name: string,
    holder: string,
    ttlSeconds: number,
    options?: LeaseCallOptions,
  ): Promise<AcquireResult>;
  renew(
    namespace: string,
    name: string,
    holder: string,
    fencingToken: number,
    ttlSeconds: number,
    options?: LeaseCallOptions,
  ): Promise<AcquireResult>;
  /** Rejects with LeaseConflictError on 409 (held by another identity or token). */
  release(
    namespace: string,
    name: string,
    holder: string,
    fencingToken: number,
    options?: LeaseCallOptions,
  ): Promise<void>;
}

/**
 * - `status`: the server answered with an error status (`status`, `serverMessage`, maybe `requestId`);
 * - `conflict`: 409 (LeaseConflictError);
 * - `timeout`: the per-request timeout passed; `aborted`: the caller's signal fired;
 * - `network`: connection, TLS or transfer failure; `protocol`: an unreadable success response;
 * - `config`: the client cannot send (no URL, unreadable key file).
 */
export type LeaseClientErrorKind =
  | 'status'
  | 'conflict'
  | 'timeout'
  | 'aborted'
  | 'network'
  | 'protocol'
  | 'config';

export class LeaseClientError extends Error {
  readonly kind: LeaseClientErrorKind;
  /** HTTP status when the server answered. */
  readonly status: number | undefined;
  /** The server's `error` message (or its body) when it answered with an error. */
  readonly serverMessage: string | undefined;
  /** Correlation id of a 5xx (look it up in the server log). */
  readonly requestId: string | undefined;

  constructor(
    kind: LeaseClientErrorKind,
    message: string,
    details: { status?: number; serverMessage?: string; requestId?: string; cause?: unknown } = {},
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'LeaseClientError';
    this.kind = kind;
    this.status = details.status;
    this.serverMessage = details.serverMessage;
    this.requestId = details.requestId;
  }
}

/** 409: the lease is held by another identity or token (the Go client's `ErrConflict`). */
export class LeaseConflictError extends LeaseClientError {
  constructor(message: string, details: { serverMessage?: string } = {}) {
    super('conflict', message, { ...details, status: 409 });
    this.name = 'LeaseConflictError';
  }
}

export const isLeaseConflict = (err: unknown): err is LeaseConflictError => err instanceof LeaseConflictError;

// ---------------------------------------------------------------------------------------------------
// Wire decoding (pure)

const GO_ZERO_TIME_MS = Date.parse('0001-01-01T00:00:00Z');
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/** RFC 3339 (any fraction precision, truncated to ms) to epoch ms; the zero time and "" are absent. */
export function parseWireTime(text: string | undefined): number | undefined {
  if (text === undefined || text === '') return undefined;
  const m = RFC3339.exec(text);
  if (m === null) throw new Error(`invalid time ${JSON.stringify(text)}`);
  const [, y, mo, d, h, mi, s, frac, , sign, oh, om] = m;
  const utc = new Date(0);
  utc.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  const millis = frac === undefined ? 0 : Number(frac.slice(1, 4).padEnd(3, '0'));
  utc.setUTCHours(Number(h), Number(mi), Number(s), millis);
  let ms = utc.getTime();
  if (sign !== undefined) ms -= (sign === '-' ? -1 : 1) * (Number(oh) * 60 + Number(om)) * 60_000;
  if (Number.isNaN(ms)) throw new Error(`invalid time ${JSON.stringify(text)}`);
  return ms <= GO_ZERO_TIME_MS ? undefined : ms;
}

const INT32_MAX = 2_147_483_647;

/** The first field of a decoded 200 body that is not of the LeaseResponse shape, with why. */
function leaseResponseProblem(body: Record<string, unknown>): string | undefined {
  if (typeof body.acquired !== 'boolean') return 'acquired: expected a boolean';
  for (const key of ['holder', 'expiresAt', 'acquiredAt'] as const)
    if (body[key] !== undefined && typeof body[key] !== 'string') return `${key}: expected a string`;
  const token = body.fencingToken;
  if (
    token !== undefined &&
    (typeof token !== 'number' || !Number.isInteger(token) || token < -INT32_MAX - 1 || token > INT32_MAX)
  )
    return 'fencingToken: expected a 32-bit integer';
  return undefined;
}

/** Decodes an acquire/renew 200 body. */
export function decodeLeaseResponse(text: string): AcquireResult {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error('response is not JSON');
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    throw new Error('unexpected response: body: expected an object');
  const body = json as Record<string, unknown>;
  const problem = leaseResponseProblem(body);
  if (problem !== undefined) throw new Error(`unexpected response: ${problem}`);
  return {
    acquired: body.acquired as boolean,
    holder: (body.holder as string | undefined) ?? '',
    fencingToken: (body.fencingToken as number | undefined) ?? 0,
    expiresAt: parseWireTime(body.expiresAt as string | undefined),
    acquiredAt: parseWireTime(body.acquiredAt as string | undefined),
  };
}

const MAX_ERROR_TEXT = 512;

/** The server's message from an error body: the envelope's `error`, else the trimmed text. */
export function errorDetails(text: string): { serverMessage: string; requestId: string | undefined } {
  try {
    const json = JSON.parse(text) as { error?: unknown; requestId?: unknown };
    if (json !== null && typeof json === 'object' && typeof json.error === 'string') {
      return {
        serverMessage: json.error,
        requestId: typeof json.requestId === 'string' ? json.requestId : undefined,
      };
    }
  } catch {
    // not the JSON envelope: use the text
  }
  const trimmed = text.trim();
  return {
    serverMessage: trimmed.length > MAX_ERROR_TEXT ? `${trimmed.slice(0, MAX_ERROR_TEXT)}...` : trimmed,
    requestId: undefined,
  };
}

// ---------------------------------------------------------------------------------------------------
// Bearer token source

/** A static key, or a key file re-read at most once per cache TTL (for rotated tokens). */
export class TokenSource {
  readonly #key: string;
  readonly #file: string;
  readonly #clock: Clock;
  readonly #ttlMs: number;
  #cached: { token: string; at: number } | undefined;
  #reading: Promise<string> | undefined;

  constructor(options: { apiKey?: string; apiKeyFile?: string; clock?: Clock; cacheTtlMs?: number }) {
    this.#key = options.apiKey ?? '';
    this.#file = options.apiKeyFile ?? '';
    if (this.#key !== '' && this.#file !== '')
      throw new Error('--berth-api-key and --berth-api-key-file are mutually exclusive');
    this.#clock = options.clock ?? realClock;
    this.#ttlMs = options.cacheTtlMs ?? TOKEN_FILE_CACHE_TTL_MS;
  }

  /** The current token ("" for none). */
  token(): Promise<string> {
    if (this.#file === '') return Promise.resolve(this.#key);
    const cached = this.#cached;
    if (cached !== undefined && this.#clock.now() - cached.at < this.#ttlMs)
      return Promise.resolve(cached.token);
    this.#reading ??= this.#read().finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  }

  async #read(): Promise<string> {
    let text: string;
    try {
      text = await readFile(this.#file, 'utf8');
    } catch (err) {
      throw new LeaseClientError(
        'config',
        `read berth API key file ${this.#file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
        { cause: err },
      );
    }
    const token = text.trim();
    this.#cached = { token, at: this.#clock.now() };
    return token;
  }
}

// ---------------------------------------------------------------------------------------------------
// HTTP implementation

/**
 * Why a central API URL cannot be used, or undefined when it can. HTTPS only, as in Go, with no escape
 * hatch: every operator replica and every injected Pod sends its bearer token with each call
 * (docs/behaviour.md §3.1). The one rule for the operator's flag, the helper's configuration and the
 * client itself.
 */
export function centralUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be an absolute URL, e.g. https://berth.example.com';
  }
  if (url.protocol === 'http:')
    return 'must be an https:// URL, not http://: the bearer token would cross the network in clear text';
  if (url.protocol !== 'https:') return 'must be an https:// URL, e.g. https://berth.example.com';
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '')
    return 'must not carry credentials, a query or a fragment';
  return undefined;
}

export interface HttpLeaseClientOptions {
  /** Base URL of the central API (`--berth-api-server`), e.g. `https://berth.example.com`. */
  baseUrl: string;
  /** `--berth-api-key`: a static bearer token. */
  apiKey?: string;
  /** `--berth-api-key-file`: re-read with a 1 s cache. */
  apiKeyFile?: string;
  /** PEM certificates trusted in addition to the system roots (the content of `--berth-ca-bundle-file`). */
  caBundle?: string;
  /** `--berth-server-name`: TLS server name (SNI and verification) instead of the URL's host. */
  serverName?: string;
  /** `--berth-insecure-skip-tls-verify`: development only; logged as a warning. */
  insecureSkipTlsVerify?: boolean;
  /** Per-request timeout (default 10 s). */
  timeoutMs?: number;
  /** Clock of the key-file cache. */
  clock?: Clock;
  logger?: Logger;
}

const MAX_RESPONSE_BYTES = 1 << 20;
// Idle kept-alive connections are dropped before typical proxy/load-balancer idle timeouts (60 s+).
const IDLE_SOCKET_TIMEOUT_MS = 30_000;

type Operation = 'acquire' | 'renew' | 'release';

interface RawResponse {
  status: number;
  text: string;
}

class TimeoutSignal extends Error {}

export class HttpLeaseClient implements LeaseClient {
  readonly #base: URL | undefined;
  readonly #tokens: TokenSource;
  readonly #timeoutMs: number;
  readonly #agent: HttpsAgent | undefined;

  constructor(options: HttpLeaseClientOptions) {
    this.#tokens = new TokenSource(options);
    this.#timeoutMs = options.timeoutMs ?? CLIENT_DEFAULT_TIMEOUT_MS;
    if (options.baseUrl === '') {
      this.#base = undefined;
      this.#agent = undefined;
      return;
    }
    const problem = centralUrlProblem(options.baseUrl);
    if (problem !== undefined)
      throw new Error(`invalid berth API server URL ${JSON.stringify(options.baseUrl)}: ${problem}`);
    const base = new URL(options.baseUrl);
    this.#base = base;
    if (options.insecureSkipTlsVerify) {
      options.logger?.warn(
        { url: base.origin },
        'TLS verification of the berth API server is disabled (--berth-insecure-skip-tls-verify): for development only',
      );
    }
    this.#agent = new HttpsAgent({
      keepAlive: true,
      timeout: IDLE_SOCKET_TIMEOUT_MS,
      ca: options.caBundle === undefined ? undefined : [...getCACertificates('default'), options.caBundle],
      servername: options.serverName || undefined,
      rejectUnauthorized: !options.insecureSkipTlsVerify,
      minVersion: 'TLSv1.2',
    });
  }

  acquire(
    namespace: string,
    name: string,
    holder: string,
    ttlSeconds: number,
    options?: LeaseCallOptions,
  ): Promise<AcquireResult> {
    return this.#lease('acquire', namespace, name, { holder, ttlSeconds: Math.trunc(ttlSeconds) }, options);
  }

  renew(
    namespace: string,
    name: string,
    holder: string,
    fencingToken: number,
    ttlSeconds: number,
    options?: LeaseCallOptions,
  ): Promise<AcquireResult> {
    return this.#lease(
      'renew',
      namespace,
      name,
      { holder, fencingToken, ttlSeconds: Math.trunc(ttlSeconds) },
      options,
    );
  }

  async release(
    namespace: string,
    name: string,
    holder: string,
    fencingToken: number,
    options?: LeaseCallOptions,
  ): Promise<void> {
    const what = `release ${namespace}/${name}`;
    const res = await this.#send(
      what,
      'POST',
      leasePath('release', namespace, name),
      { holder, fencingToken },
      options,
    );
    this.#check(what, res);
  }

  /** The per-request timeout used when a call does not give its own. */
  get timeoutMs(): number {
    return this.#timeoutMs;
  }

  /** GET /healthz: resolves on 2xx (the operator's readiness check in lease-only mode). */
  async ping(options?: LeaseCallOptions): Promise<void> {
    const res = await this.#send('ping', 'GET', '/healthz', undefined, options);
    this.#check('ping', res);
  }

  /** Closes idle keep-alive connections. */
  close(): void {
    this.#agent?.destroy();
  }

  async #lease(
    op: Operation,
    namespace: string,
    name: string,
    body: object,
    options: LeaseCallOptions | undefined,
  ): Promise<AcquireResult> {
    const what = `${op} ${namespace}/${name}`;
    const res = await this.#send(what, 'POST', leasePath(op, namespace, name), body, options);
    this.#check(what, res);
    try {
      return decodeLeaseResponse(res.text);
    } catch (err) {
      throw new LeaseClientError('protocol', `${what}: ${(err as Error).message}`, { status: res.status });
    }
  }

  #check(what: string, res: RawResponse): void {
    if (res.status >= 200 && res.status < 300) return;
    const { serverMessage, requestId } = errorDetails(res.text);
    if (res.status === 409)
      throw new LeaseConflictError(`${what}: server status 409: ${serverMessage}`, { serverMessage });
    const suffix = requestId === undefined ? '' : ` (requestId ${requestId})`;
    throw new LeaseClientError('status', `${what}: server status ${res.status}: ${serverMessage}${suffix}`, {
      status: res.status,
      serverMessage,
      requestId,
    });
  }

  async #send(
    what: string,
    method: 'GET' | 'POST',
    path: string,
    body: object | undefined,
    options: LeaseCallOptions | undefined,
  ): Promise<RawResponse> {
    const base = this.#base;
    if (base === undefined)
      throw new LeaseClientError('config', `${what}: no berth API server URL is configured`);
    const callerSignal = options?.signal;
    if (callerSignal?.aborted) throw aborted(what, callerSignal.reason);
    const token = await this.#tokens.token().catch((err: unknown) => {
      throw err instanceof LeaseClientError ? new LeaseClientError('config', `${what}: ${err.message}`) : err;
    });
    const url = new URL(`${base.pathname.replace(/\/+$/, '')}${path}`, base);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    if (token !== '') headers.authorization = `Bearer ${token}`;
    const timeoutMs = options?.timeoutMs ?? this.#timeoutMs;

    return new Promise<RawResponse>((resolve, reject) => {
      let settled = false;
      let req: ClientRequest | undefined;
      const finish = (err: LeaseClientError | undefined, value?: RawResponse): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        callerSignal?.removeEventListener('abort', onAbort);
        if (err === undefined) resolve(value!);
        else {
          req?.destroy();
          reject(err);
        }
      };
      const timer = setTimeout(() => {
        finish(
          new LeaseClientError('timeout', `${what}: timed out after ${timeoutMs}ms`, {
            cause: new TimeoutSignal(),
          }),
        );
      }, timeoutMs);
      const onAbort = (): void => finish(aborted(what, callerSignal?.reason));
      callerSignal?.addEventListener('abort', onAbort, { once: true });

      const attempt = (retried: boolean): void => {
        const current = httpsRequest(url, { method, headers, agent: this.#agent });
        req = current;
        let answered = false;
        current.on('error', (err: NodeJS.ErrnoException) => {
          if (settled) return;
          // A kept-alive connection the server closed while idle: every operation is safe to repeat
          // (acquire renews in place, renew and release are idempotent), so retry once on a new one.
          if (
            !answered &&
            !retried &&
            current.reusedSocket &&
            (err.code === 'ECONNRESET' || err.code === 'EPIPE')
          ) {
            attempt(true);
            return;
          }
          finish(new LeaseClientError('network', `${what}: ${networkMessage(err)}`, { cause: err }));
        });
        current.on('response', (res: IncomingMessage) => {
          answered = true;
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_RESPONSE_BYTES)
              finish(
                new LeaseClientError('protocol', `${what}: response larger than ${MAX_RESPONSE_BYTES} bytes`),
              );
            else chunks.push(chunk);
          });
          res.on('error', (err) =>
            finish(new LeaseClientError('network', `${what}: ${networkMessage(err)}`, { cause: err })),
          );
          res.on('end', () =>
            finish(undefined, { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
          );
        });
        current.end(payload);
      };
      attempt(false);
    });
  }
}

function leasePath(op: Operation, namespace: string, name: string): string {
  return `/v1alpha1/namespaces/${encodeURIComponent(namespace)}/leases/${encodeURIComponent(name)}/${op}`;
}

function aborted(what: string, reason: unknown): LeaseClientError {
  const detail = reason instanceof Error ? reason.message : reason === undefined ? '' : String(reason);
  return new LeaseClientError('aborted', `${what}: aborted${detail === '' ? '' : `: ${detail}`}`, {
    cause: reason,
  });
}

function networkMessage(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code !== undefined && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
}
