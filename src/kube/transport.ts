// The request transport of the process (KubeTransport): raw requests through the kubeconfig's
// authentication and TLS settings, on one connection pool, bounded by a request timeout (watches excepted),
// counted in client-go's rest_client metrics. Every request of the process goes through it: the informers'
// list+watch, admission's reads, the controllers' writes, events and leader election.
import { Readable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import { HttpMethod, RequestContext } from '@kubernetes/client-node/dist/gen/http/http.js';
import type { Registry } from 'prom-client';
import { request as undiciRequest } from 'undici';
import { type Clock, realClock } from './clock.ts';
import { type RestClientMetrics, restClientMetrics } from './rest-client-metrics.ts';

export interface RawRequest {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Absolute API path, e.g. `/api/v1/namespaces/default/pods`. */
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  /** This request's bound instead of the transport's (for callers that must answer sooner). */
  timeoutMs?: number;
}

export interface RawResponse {
  status: number;
  /** Lower-case header names. */
  headers: Record<string, string>;
  text(): Promise<string>;
  stream(): ReadableStream<Uint8Array> | null;
}

/** What the informer needs from a transport; tests substitute fakes. */
export interface KubeRequester {
  request(req: RawRequest): Promise<RawResponse>;
}

/**
 * Keeps one connection pool (undici dispatcher) for a series of requests. client-node's
 * `applySecurityAuthentication` builds a new undici Agent for every request, so every typed-client call
 * otherwise opens a new TCP + TLS connection (and leaves it open until the pool is collected). Call
 * `apply(ctx)` after authentication has been applied to the request context: the first request's
 * dispatcher is kept, later requests get it instead of their own.
 */
export class DispatcherReuse {
  #dispatcher: ReturnType<RequestContext['getDispatcher']>;
  #cached = false;

  apply(ctx: RequestContext): void {
    if (this.#cached) {
      if (this.#dispatcher !== undefined) ctx.setDispatcher(this.#dispatcher);
      return;
    }
    this.#dispatcher = ctx.getDispatcher();
    this.#cached = true;
  }

  /** Destroys the pool, failing requests still in flight; a later request starts a new one. */
  async close(): Promise<void> {
    const dispatcher = this.#dispatcher;
    this.#dispatcher = undefined;
    this.#cached = false;
    await dispatcher?.destroy();
  }
}

/** kube-apiserver's default `--request-timeout`: no non-watch request is served for longer. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

export interface KubeTransportOptions {
  /**
   * Bound on every non-watch request, reading its response with `text()` included (default 60 s;
   * 0: none). A request passing it fails with a RequestTimeoutError. Watches are not bounded here:
   * their callers bound them (the informer's inactivity timeout).
   */
  requestTimeoutMs?: number;
  clock?: Clock;
  /** Where rest_client_requests_total and rest_client_request_duration_seconds go (default: nowhere). */
  registry?: Registry;
}

/** A request that got no complete answer within the transport's request timeout. */
export class RequestTimeoutError extends Error {
  constructor(method: string, path: string, ms: number) {
    super(`${method} ${path} timed out after ${ms}ms`);
    this.name = 'RequestTimeoutError';
  }
}

function isWatchRequest(req: RawRequest): boolean {
  const watch = req.query?.watch;
  return watch === true || watch === 'true' || watch === '1' || watch === 1 || /\/watch\//.test(req.path);
}

/**
 * Requests through the KubeConfig's authentication and TLS settings, on the undici dispatcher client-node
 * builds for them. Authentication is applied per request, so rotating tokens keep working; the connection
 * pool (dispatcher) is created once and reused. The request itself is undici's `request`, not the `fetch`
 * client-node's typed clients go through: the same connections and the same library, at about 0.7 of the
 * CPU per request (docs/performance.md, "The API client"). Non-watch requests are bounded by a request
 * timeout, so a server or connection that never answers cannot hang a caller (a reconcile, a stop()).
 */
export class KubeTransport implements KubeRequester {
  readonly #kc: KubeConfig;
  readonly #pool = new DispatcherReuse();
  readonly #timeoutMs: number;
  readonly #clock: Clock;
  readonly #metrics: RestClientMetrics | undefined;

  constructor(kc: KubeConfig, options: KubeTransportOptions = {}) {
    this.#kc = kc;
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#clock = options.clock ?? realClock;
    this.#metrics = options.registry ? restClientMetrics(options.registry) : undefined;
  }

  get server(): string {
    const cluster = this.#kc.getCurrentCluster();
    if (cluster === null) throw new Error('no current cluster in the kubeconfig');
    return cluster.server.replace(/\/+$/, '');
  }

  async request(req: RawRequest): Promise<RawResponse> {
    const started = performance.now();
    const method = req.method ?? 'GET';
    const url = new URL(this.server + req.path);
    for (const [key, value] of Object.entries(req.query ?? {})) {
      if (value !== undefined && value !== '') url.searchParams.set(key, String(value));
    }
    let observed = false;
    // Once per request: at the end of its answer, or of its headers when the caller streams it.
    const observe = (code: number | '<error>'): void => {
      if (observed || this.#metrics === undefined) return;
      observed = true;
      this.#metrics.observe(method, url.host, code, (performance.now() - started) / 1000);
    };
    const ctx = new RequestContext(url.toString(), HttpMethod[method]);
    await this.#kc.applySecurityAuthentication(ctx);
    this.#pool.apply(ctx);
    const headers: Record<string, string> = { ...ctx.getHeaders(), Accept: 'application/json' };
    let body: string | undefined;
    if (req.body !== undefined) {
      headers['Content-Type'] = req.contentType ?? 'application/json';
      body = typeof req.body === 'string' ? req.body : JSON.stringify(req.body);
    }
    const timeoutMs = req.timeoutMs ?? this.#timeoutMs;
    const bounded = timeoutMs > 0 && Number.isFinite(timeoutMs) && !isWatchRequest(req);
    let timer: { cancel(): void } | undefined;
    let signal = req.signal;
    let timedOut = (err: unknown): unknown => err;
    if (bounded) {
      const timeout = new AbortController();
      timer = this.#clock.setTimeout(
        () => timeout.abort(new RequestTimeoutError(method, req.path, timeoutMs)),
        timeoutMs,
      );
      signal = req.signal ? AbortSignal.any([req.signal, timeout.signal]) : timeout.signal;
      // Whatever undici rejects with on abort, report the timeout as such (a caller's own abort stays as is).
      timedOut = (err) => (timeout.signal.aborted && !req.signal?.aborted ? timeout.signal.reason : err);
    }
    let res: Awaited<ReturnType<typeof undiciRequest>>;
    try {
      res = await undiciRequest(url, {
        method,
        headers,
        body,
        signal,
        dispatcher: ctx.getDispatcher(),
      });
    } catch (err) {
      timer?.cancel();
      observe('<error>');
      throw timedOut(err);
    }
    const status = res.statusCode;
    return {
      status,
      headers: joinedHeaders(res.headers),
      text: async () => {
        try {
          const text = await res.body.text();
          observe(status);
          return text;
        } catch (err) {
          observe('<error>');
          throw timedOut(err);
        } finally {
          timer?.cancel();
        }
      },
      // A caller streaming a response reads it at its own pace: the bound ends here.
      stream: () => {
        timer?.cancel();
        observe(status);
        return Readable.toWeb(res.body) as ReadableStream<Uint8Array>;
      },
    };
  }

  /**
   * Destroys the connection pool, failing requests still in flight (open watches included): stop the
   * informers first. The process otherwise keeps the pool for its lifetime.
   */
  async close(): Promise<void> {
    await this.#pool.close();
  }
}

/** undici's response headers (lower-case names, repeated ones as arrays) as one string per name. */
function joinedHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}
