// The admission server: Fastify over HTTPS (TLS 1.2+), serving AdmissionReview handlers on every replica.
//
// The contract with the API server (failurePolicy Fail makes every misstep a denial, so none is left to
// chance): a body over 7 MiB gets 413, a non-JSON content type 415, unparsable JSON or a review without a
// usable uid 400; anything else gets HTTP 200 and a well-formed AdmissionReview in the request's apiVersion
// echoing the uid. A malformed review (a prototype-poisoning key such as `__proto__` included) is denied
// with code 400, a handler error with 500, a review that runs past its deadline (from `?timeout=`, at most
// 5 s) with 504; nothing that fails is ever allowed.
// Keep-alive outlasts the API server's 90 s idle timeout, so it never writes to a connection we closed.
// Certificates hot-swap through setSecureContext without dropping connections.
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { type SecureContextOptions, connect as tlsConnect } from 'node:tls';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import { LOCAL_TIMEOUT_MS } from '../src/berth/api.ts';
import { type Clock, realClock } from '../src/kube/clock.ts';
import type { HealthCheck } from '../src/observability/health.ts';
import type { Logger } from '../src/observability/logger.ts';
import { type WebhookMetrics, webhookMetrics } from './metrics.ts';
import {
  type AdmissionRequest,
  admissionReviewSchema,
  answerApiVersion,
  type Decision,
  deny,
  describeIssues,
  prototypeKey,
  reviewResponse,
  usableUid,
} from './review.ts';

export const DEFAULT_WEBHOOK_PORT = 9443;
/** controller-runtime's maxRequestSize: two objects of up to 3 MB plus the envelope. */
export const MAX_BODY_BYTES = 7 * 1024 * 1024;
/** Longer than kube-apiserver's 90 s idle-connection timeout. */
export const KEEP_ALIVE_TIMEOUT_MS = 95_000;
/** A whole request must arrive within this (the API server's own timeout is at most 30 s). */
export const REQUEST_TIMEOUT_MS = 35_000;
/** How long close() waits for in-flight reviews before cutting connections (controller-runtime: 1 min). */
export const CLOSE_TIMEOUT_MS = 60_000;

export interface CertificatePair {
  cert: string | Buffer;
  key: string | Buffer;
  ca?: string | Buffer | undefined;
}

/**
 * What the server needs of the certificate provider (certs/ CertificateProvider satisfies it). It must hold
 * a pair when the server is constructed (wait with `provider.waitForCertificate()` first).
 */
export interface CertificateSource {
  current(): CertificatePair | undefined;
  /** Called when the pair changes; may return an unsubscribe function. */
  onChange(listener: () => void): unknown;
}

function currentPair(source: CertificateSource): CertificatePair {
  const pair = source.current();
  if (pair === undefined)
    throw new Error('admission server: no serving certificate yet (wait for the certificate provider first)');
  return pair;
}

export interface ReviewContext {
  /** Aborted when the review's deadline passes (its answer has then already been sent). */
  signal: AbortSignal;
  log: Logger | undefined;
  /** The path, which is also the `webhook` metrics label. */
  webhook: string;
}

export interface AdmissionHandler {
  /** URL path, e.g. `/validate-managed-workloads`. */
  path: string;
  review(request: AdmissionRequest, ctx: ReviewContext): Promise<Decision>;
}

export interface AdmissionServerOptions {
  /** `--webhook-port`; 0 picks a free port. */
  port: number;
  /** Interface to bind; default every interface. */
  host?: string;
  certificates: CertificateSource;
  handlers: readonly AdmissionHandler[];
  registry: Registry;
  logger?: Logger;
  clock?: Clock;
  /** Upper bound of one review's handler time; default 5 s (the original's admission timeout). */
  maxReviewMs?: number;
  closeTimeoutMs?: number;
}

/** Go duration as kube-apiserver writes `?timeout=` (`10s`, `1m0s`, `500ms`), in milliseconds. */
export function parseTimeoutQuery(value: unknown): number | undefined {
  if (typeof value !== 'string' || !/^(\d+(\.\d+)?(h|m|s|ms|us|µs|ns))+$/.test(value)) return undefined;
  const unit: Record<string, number> = {
    h: 3_600_000,
    m: 60_000,
    s: 1000,
    ms: 1,
    us: 1e-3,
    µs: 1e-3,
    ns: 1e-6,
  };
  let total = 0;
  for (const m of value.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g)) total += Number(m[1]) * unit[m[2]!]!;
  return total > 0 ? total : undefined;
}

/**
 * The handler's budget: what the API server allows minus a margin for the way back (20 %, at most 1 s),
 * capped at `max`. Without a usable `?timeout=`, `max`.
 */
export function reviewBudgetMs(timeoutMs: number | undefined, max: number): number {
  if (timeoutMs === undefined) return max;
  return Math.max(1, Math.min(max, timeoutMs - Math.min(1000, timeoutMs * 0.2)));
}

/** Every interface: `::` (dual stack) where the host has IPv6, else `0.0.0.0`. */
function defaultHost(): string {
  const hasIPv6 = Object.values(networkInterfaces()).some((list) =>
    (list ?? []).some((i) => i.family === 'IPv6'),
  );
  return hasIPv6 ? '::' : '0.0.0.0';
}

/** Where a local client reaches a server bound to `address` (a wildcard bind is reached on loopback). */
function loopbackFor(address: AddressInfo): string {
  if (address.address === '::') return '::1';
  if (address.address === '0.0.0.0') return '127.0.0.1';
  return address.address;
}

function tlsOptions(pair: CertificatePair): SecureContextOptions {
  return { cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' };
}

interface RequestState {
  webhook: string;
  started: bigint;
  finished: boolean;
}

const describe = (err: unknown): string =>
  (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).split('\n', 1)[0]!.slice(0, 300);

export class AdmissionServer {
  readonly #options: AdmissionServerOptions;
  readonly #clock: Clock;
  readonly #metrics: WebhookMetrics;
  readonly #app: FastifyInstance<HttpsServer>;
  readonly #states = new WeakMap<FastifyRequest, RequestState>();
  #unsubscribe: unknown;
  #listening = false;
  #closing: Promise<void> | undefined;
  #port = 0;
  #dialHost = '127.0.0.1';

  constructor(options: AdmissionServerOptions) {
    this.#options = options;
    this.#clock = options.clock ?? realClock;
    this.#metrics = webhookMetrics(options.registry);
    this.#app = Fastify<HttpsServer>({
      https: tlsOptions(currentPair(options.certificates)),
      bodyLimit: MAX_BODY_BYTES,
      // Parsed as plain JSON.parse (own properties only, no prototype is touched); #serve then denies a
      // review holding such keys with a well-formed answer instead of the parser's bare 400.
      onProtoPoisoning: 'ignore',
      onConstructorPoisoning: 'ignore',
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      requestTimeout: REQUEST_TIMEOUT_MS,
      // During a graceful close, requests still arriving on open connections are answered, not 503'd:
      // under failurePolicy Fail a 503 is a denial.
      return503OnClosing: false,
      forceCloseConnections: 'idle',
      logger: false,
    });
    this.#routes();
  }

  /** The bound port (after start). */
  get port(): number {
    return this.#port;
  }

  get listening(): boolean {
    return this.#listening;
  }

  async start(): Promise<number> {
    // Subscribed before listening, so a pair that changes meanwhile is not missed.
    this.#unsubscribe = this.#options.certificates.onChange(() => this.#reloadCertificate());
    try {
      await this.#app.listen({ port: this.#options.port, host: this.#options.host ?? defaultHost() });
    } catch (err) {
      this.#unsubscribeCertificates();
      throw err;
    }
    const address = this.#app.server.address() as AddressInfo;
    this.#port = address.port;
    this.#dialHost = loopbackFor(address);
    this.#listening = true;
    this.#options.logger?.info({ port: this.#port }, 'admission server listening');
    return this.#port;
  }

  #unsubscribeCertificates(): void {
    const unsubscribe = this.#unsubscribe;
    this.#unsubscribe = undefined;
    if (typeof unsubscribe === 'function') (unsubscribe as () => void)();
  }

  /**
   * Readiness: the server accepts a TLS handshake on its port (controller-runtime's StartedChecker).
   * Register it as a readiness check.
   */
  readonly startedCheck: HealthCheck = () => {
    if (!this.#listening) throw new Error('admission server is not listening');
    return new Promise<void>((resolve, reject) => {
      const socket = tlsConnect({
        host: this.#dialHost,
        port: this.#port,
        rejectUnauthorized: false,
        servername: 'localhost',
      });
      socket.setTimeout(2000, () => {
        socket.destroy();
        reject(new Error('admission server TLS handshake timed out'));
      });
      socket.once('secureConnect', () => {
        socket.end();
        resolve();
      });
      socket.once('error', (err) =>
        reject(new Error(`admission server TLS handshake failed: ${err.message}`)),
      );
    });
  };

  /** Stops accepting, lets in-flight reviews finish (bounded by closeTimeoutMs), then resolves. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#unsubscribeCertificates();
    this.#listening = false;
    const server = this.#app.server;
    const cut = this.#clock.setTimeout(
      () => server.closeAllConnections(),
      this.#options.closeTimeoutMs ?? CLOSE_TIMEOUT_MS,
    );
    // Connections that finish a request after close() started become idle; reap them as they do.
    const reap = this.#clock.setInterval(() => server.closeIdleConnections(), 50);
    try {
      await this.#app.close();
    } finally {
      cut.cancel();
      reap.cancel();
    }
  }

  #reloadCertificate(): void {
    try {
      this.#app.server.setSecureContext(tlsOptions(currentPair(this.#options.certificates)));
      this.#options.logger?.info('admission server certificate reloaded');
    } catch (err) {
      this.#metrics.certificateReloadErrors.inc();
      this.#options.logger?.error({ err: describe(err) }, 'admission server kept its previous certificate');
    }
  }

  #routes(): void {
    const app = this.#app;
    // JSON only: Fastify's default text/plain parser would hand a string to the handlers.
    app.removeContentTypeParser('text/plain');
    app.setErrorHandler((err: { statusCode?: number; message?: string }, request, reply) => {
      // Framework errors (body too large, wrong content type, bad JSON): a 4xx the API server treats as a
      // failed call. Never our handlers: they turn every error into a denial.
      const code =
        typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500
          ? err.statusCode
          : 500;
      if (code >= 500)
        this.#options.logger?.error({ err: describe(err), url: request.url }, 'admission request failed');
      void reply
        .code(code)
        .send({ code, message: code >= 500 ? 'internal error' : (err.message ?? 'bad request') });
    });
    for (const handler of this.#options.handlers) {
      app.route({
        method: 'POST',
        url: handler.path,
        onRequest: async (request, reply) => {
          this.#states.set(request, {
            webhook: handler.path,
            started: process.hrtime.bigint(),
            finished: false,
          });
          this.#metrics.inFlight.inc({ webhook: handler.path });
          // Fastify's onRequestAbort misses a client that leaves after its body arrived, while the
          // review is pending; the response's close event comes in every case.
          reply.raw.once('close', () =>
            this.#finish(request, reply.raw.writableFinished ? reply.statusCode : 499),
          );
        },
        onResponse: async (request, reply) => this.#finish(request, reply.statusCode),
        onRequestAbort: async (request) => this.#finish(request, 499),
        handler: (request, reply) => this.#serve(handler, request, reply),
      });
    }
  }

  #finish(request: FastifyRequest, statusCode: number): void {
    const state = this.#states.get(request);
    if (state === undefined || state.finished) return;
    state.finished = true;
    const seconds = Number(process.hrtime.bigint() - state.started) / 1e9;
    this.#metrics.inFlight.dec({ webhook: state.webhook });
    this.#metrics.latency.observe({ webhook: state.webhook }, seconds);
    this.#metrics.requests.inc({ webhook: state.webhook, code: String(statusCode) });
  }

  async #serve(handler: AdmissionHandler, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const body = request.body;
    const uid = usableUid(body);
    if (uid === undefined) {
      this.#metrics.rejections.inc({ reason: 'no-uid' });
      return reply
        .code(400)
        .send({ code: 400, message: 'AdmissionReview request.uid is missing or not usable' });
    }
    const apiVersion = answerApiVersion(body);
    const forbidden = prototypeKey(body);
    const parsed = forbidden === undefined ? admissionReviewSchema.safeParse(body) : undefined;
    const log = this.#options.logger?.child({ webhook: handler.path, uid });
    let decision: Decision;
    if (parsed === undefined) {
      decision = deny(
        'malformed',
        `malformed AdmissionReview: forbidden key ${JSON.stringify(forbidden)}`,
        400,
      );
    } else if (!parsed.success) {
      decision = deny('malformed', `malformed AdmissionReview: ${describeIssues(parsed.error)}`, 400);
    } else {
      const query = request.query as Record<string, unknown> | undefined;
      const budget = reviewBudgetMs(
        parseTimeoutQuery(query?.timeout),
        this.#options.maxReviewMs ?? LOCAL_TIMEOUT_MS,
      );
      decision = await this.#decide(handler, parsed.data.request, budget, log);
    }
    if (!decision.allowed) {
      this.#metrics.rejections.inc({ reason: decision.reason });
      const r = parsed?.success ? parsed.data.request : undefined;
      log?.info(
        {
          reason: decision.reason,
          code: decision.code,
          operation: r?.operation,
          kind: r?.kind.kind,
          subResource: r?.subResource,
          namespace: r?.namespace,
          name: r?.name,
          username: r?.userInfo.username,
        },
        `denied: ${decision.message}`,
      );
    }
    return reply
      .code(200)
      .header('content-type', 'application/json')
      .send(reviewResponse(apiVersion, uid, decision));
  }

  /** Runs the handler under the deadline; every failure becomes a denial. */
  async #decide(
    handler: AdmissionHandler,
    req: AdmissionRequest,
    budgetMs: number,
    log: Logger | undefined,
  ): Promise<Decision> {
    const abort = new AbortController();
    let timer: { cancel(): void } | undefined;
    const deadline = new Promise<Decision>((resolve) => {
      timer = this.#clock.setTimeout(() => {
        abort.abort(new Error('admission review deadline exceeded'));
        resolve(deny('deadline', `admission review did not complete within ${Math.round(budgetMs)}ms`, 504));
      }, budgetMs);
    });
    const work = (async (): Promise<Decision> => {
      try {
        return await handler.review(req, { signal: abort.signal, log, webhook: handler.path });
      } catch (err) {
        if (abort.signal.aborted) return deny('deadline', 'admission review deadline exceeded', 504);
        this.#metrics.panics.inc();
        log?.error({ err: describe(err) }, 'admission handler failed; denying');
        return deny('internal-error', `internal error: ${describe(err)}`, 500);
      }
    })();
    try {
      return await Promise.race([work, deadline]);
    } finally {
      timer?.cancel();
    }
  }
}
