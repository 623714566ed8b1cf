// The admission server: Fastify over HTTPS (TLS 1.2+), serving AdmissionReview handlers on every replica.
//
// The contract with the API server (failurePolicy Fail makes every misstep a denial, so none is left to
// chance): a body over 7 MiB gets 413, a non-JSON content type 415, unparsable JSON or a review without a
// usable uid 400; anything else gets HTTP 200 and a well-formed AdmissionReview in the request's apiVersion
// echoing the uid. A malformed review (a prototype-poisoning key such as `__proto__` included) is denied
// with code 400, a handler error with 500, a review that runs past its deadline (from `?timeout=`, at most
// 5 s) with 504; nothing that fails is ever allowed.
// Keep-alive outlasts the API server's 90 s idle timeout, so it never writes to a connection we closed.
// Once a shutdown begins (drain(), and close()) every answer closes its connection: kube-apiserver keeps
// its connections to a replica that is no longer an endpoint and sends reviews on them until they close,
// so a connection the server closed itself could have a review already on its way (a failed call, which
// failurePolicy Fail turns into a denial); a client told `Connection: close` sends nothing more on it.
// Slow or idle clients cannot hold connections: the TLS handshake, the request headers and the whole
// request each have a deadline, enforced every second (see ServerTimeouts).
// Certificates hot-swap through setSecureContext without dropping connections.
import type { IncomingMessage } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { type SecureContextOptions, connect as tlsConnect } from 'node:tls';
import Fastify, { errorCodes, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import { LOCAL_TIMEOUT_MS } from '../src/berth/api.ts';
import { type Clock, realClock } from '../src/kube/clock.ts';
import type { HealthCheck } from '../src/observability/health.ts';
import type { Logger } from '../src/observability/logger.ts';
import { type WebhookMetrics, webhookMetrics } from './metrics.ts';
import type { CounterSeries, GaugeSeries, HistogramSeries } from './plain-metrics.ts';
import {
  type AdmissionApiVersion,
  type AdmissionRequest,
  type AdmissionReview,
  admissionReviewSchema,
  answerApiVersion,
  type Decision,
  deny,
  describeIssues,
  isAdmissionReview,
  mayHoldPrototypeKey,
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
/**
 * The request line and headers must arrive within this, counted from the end of the TLS handshake (or
 * the previous response on a kept-alive connection). The API server writes them at once; without this,
 * Node's default (60 s, capped by the request timeout) lets a slow-loris client trickle headers for 35 s
 * per connection.
 */
export const HEADERS_TIMEOUT_MS = 10_000;
/**
 * A TCP connection must finish its TLS handshake within this. Node's default is 120 s, which lets
 * connections that never send a ClientHello pile up.
 */
export const HANDSHAKE_TIMEOUT_MS = 10_000;
/**
 * How often Node checks the headers and request deadlines. Its default (30 s) would let a slow client
 * outlive HEADERS_TIMEOUT_MS by up to 30 s; checking a few hundred connections each second costs nothing.
 */
export const CONNECTIONS_CHECK_INTERVAL_MS = 1_000;
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

/** The connection deadlines (tests shorten them; production uses the defaults above). */
export interface ServerTimeouts {
  handshakeMs: number;
  headersMs: number;
  requestMs: number;
  checkIntervalMs: number;
}

export const DEFAULT_SERVER_TIMEOUTS: ServerTimeouts = {
  handshakeMs: HANDSHAKE_TIMEOUT_MS,
  headersMs: HEADERS_TIMEOUT_MS,
  requestMs: REQUEST_TIMEOUT_MS,
  checkIntervalMs: CONNECTIONS_CHECK_INTERVAL_MS,
};

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
  timeouts?: Partial<ServerTimeouts>;
}

const DURATION_UNITS_MS: Record<string, number> = {
  h: 3_600_000,
  m: 60_000,
  s: 1000,
  ms: 1,
  us: 1e-3,
  µs: 1e-3,
  ns: 1e-6,
};

function parseDuration(value: string): number | undefined {
  if (!/^(\d+(\.\d+)?(h|m|s|ms|us|µs|ns))+$/.test(value)) return undefined;
  let total = 0;
  for (const m of value.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g))
    total += Number(m[1]) * DURATION_UNITS_MS[m[2]!]!;
  return total > 0 ? total : undefined;
}

/**
 * The API server sends the same `?timeout=` (the webhook's timeoutSeconds) with every review: the first
 * few values seen are remembered, so the duration is parsed once, not per review.
 */
const parsedTimeouts = new Map<string, number | undefined>();
const MAX_PARSED_TIMEOUTS = 32;

/** Go duration as kube-apiserver writes `?timeout=` (`10s`, `1m0s`, `500ms`), in milliseconds. */
export function parseTimeoutQuery(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  if (parsedTimeouts.has(value)) return parsedTimeouts.get(value);
  const ms = parseDuration(value);
  if (parsedTimeouts.size < MAX_PARSED_TIMEOUTS) parsedTimeouts.set(value, ms);
  return ms;
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

/** A route's metric series, taken once rather than looked up per request. */
interface RouteSeries {
  webhook: string;
  inFlight: GaugeSeries;
  latency: HistogramSeries;
  ok: CounterSeries;
}

interface RequestState {
  route: RouteSeries;
  started: number;
  finished: boolean;
  /** Set by the JSON parser: the prototype-poisoning key the body holds, if any. */
  forbidden: string | undefined;
  /** Whether the JSON parser has looked for such keys. */
  scanned: boolean;
}

/**
 * Where a request carries its state: a Fastify request decoration (declared on every request up front,
 * so requests keep one shape), cheaper than a WeakMap lookup in each of the hooks that need it.
 */
const STATE = 'berthAdmission';
type StatefulRequest = FastifyRequest & { [STATE]: RequestState | null };

/** What Fastify sends for a JSON body (it appends the charset to a bare `application/json`). */
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * One review's context. Its child logger and its AbortController are made on first use: most reviews are
 * allowed without a line and without an API read. A class, so that the lazy `log` and `signal` are getters
 * on the prototype, not built per review.
 */
class ReviewScope implements ReviewContext {
  readonly webhook: string;
  readonly #parent: Logger | undefined;
  readonly #uid: string;
  #log: Logger | undefined | null = null;
  #abort: AbortController | undefined;
  /** Set when the deadline passed; a signal handed out later is born aborted with it. */
  #expired: Error | undefined;

  constructor(parent: Logger | undefined, webhook: string, uid: string) {
    this.#parent = parent;
    this.webhook = webhook;
    this.#uid = uid;
  }

  get signal(): AbortSignal {
    if (this.#abort === undefined) {
      this.#abort = new AbortController();
      if (this.#expired !== undefined) this.#abort.abort(this.#expired);
    }
    return this.#abort.signal;
  }

  get expired(): boolean {
    return this.#expired !== undefined;
  }

  /** The deadline passed: aborts the signal if one was handed out, or marks the one to come. */
  expire(reason: Error): void {
    this.#expired = reason;
    this.#abort?.abort(reason);
  }

  get log(): Logger | undefined {
    if (this.#log === null) this.#log = this.#parent?.child({ webhook: this.webhook, uid: this.#uid });
    return this.#log;
  }
}

const describe = (err: unknown): string =>
  (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).split('\n', 1)[0]!.slice(0, 300);

export class AdmissionServer {
  readonly #options: AdmissionServerOptions;
  readonly #clock: Clock;
  readonly #metrics: WebhookMetrics;
  readonly #app: FastifyInstance<HttpsServer>;
  #unsubscribe: unknown;
  #listening = false;
  #draining = false;
  #closing: Promise<void> | undefined;
  #port = 0;
  #dialHost = '127.0.0.1';
  /**
   * TLS connections that have not carried a request yet. Go's HTTP client (kube-apiserver's) dials spare
   * connections and keeps them unused in its pool; Node's closeIdleConnections() leaves such a connection
   * open, so close() would wait closeTimeoutMs for it.
   */
  readonly #unused = new Set<Socket>();

  constructor(options: AdmissionServerOptions) {
    this.#options = options;
    this.#clock = options.clock ?? realClock;
    this.#metrics = webhookMetrics(options.registry);
    const timeouts = { ...DEFAULT_SERVER_TIMEOUTS, ...options.timeouts };
    this.#app = Fastify<HttpsServer>({
      // Handed to https.createServer, which takes the TLS and the http.Server options together.
      https: {
        ...tlsOptions(currentPair(options.certificates)),
        handshakeTimeout: timeouts.handshakeMs,
        headersTimeout: timeouts.headersMs,
        requestTimeout: timeouts.requestMs,
        connectionsCheckingInterval: timeouts.checkIntervalMs,
      },
      bodyLimit: MAX_BODY_BYTES,
      // JSON is parsed by #parseJson below, which lets prototype-poisoning keys through (JSON.parse defines
      // them as own properties, no prototype is touched) so that #serve denies such a review with a
      // well-formed answer instead of the parser's bare 400.
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      requestTimeout: timeouts.requestMs,
      // During a graceful close, requests still arriving on open connections are answered, not 503'd:
      // under failurePolicy Fail a 503 is a denial.
      return503OnClosing: false,
      forceCloseConnections: 'idle',
      logger: false,
    });
    this.#app.server.on('secureConnection', (socket: Socket) => {
      this.#unused.add(socket);
      socket.once('close', () => this.#unused.delete(socket));
    });
    this.#app.server.on('request', (request: IncomingMessage) => this.#unused.delete(request.socket));
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

  /**
   * A shutdown begins (readiness has failed; the server keeps serving for the drain window): from now on
   * every answer closes its connection, so clients move to the other endpoints, each after a complete
   * answer. Idempotent.
   */
  drain(): void {
    this.#draining = true;
  }

  /** Drains, stops accepting, lets in-flight reviews finish (bounded by closeTimeoutMs), then resolves. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#draining = true;
    this.#unsubscribeCertificates();
    this.#listening = false;
    const server = this.#app.server;
    const cut = this.#clock.setTimeout(
      () => server.closeAllConnections(),
      this.#options.closeTimeoutMs ?? CLOSE_TIMEOUT_MS,
    );
    // Connections that finish a request after close() started become idle; reap them as they do, and
    // those that never carried one.
    const reap = this.#clock.setInterval(() => {
      server.closeIdleConnections();
      for (const socket of this.#unused) socket.destroy();
    }, 50);
    try {
      await this.#app.close();
    } finally {
      cut.cancel();
      reap.cancel();
    }
  }

  /** While draining: the answer says `Connection: close`, and Node closes the connection after it. */
  #closeIfDraining(reply: FastifyReply): void {
    if (this.#draining) reply.header('connection', 'close');
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
    app.decorateRequest(STATE, null);
    // JSON only: Fastify's default text/plain parser would hand a string to the handlers.
    app.removeContentTypeParser('text/plain');
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, text, done) =>
      this.#parseJson(request, text as string, done),
    );
    app.setErrorHandler((err: { statusCode?: number; message?: string }, request, reply) => {
      // Framework errors (body too large, wrong content type, bad JSON): a 4xx the API server treats as a
      // failed call. Never our handlers: they turn every error into a denial.
      const code =
        typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500
          ? err.statusCode
          : 500;
      if (code >= 500)
        this.#options.logger?.error({ err: describe(err), url: request.url }, 'admission request failed');
      this.#closeIfDraining(reply);
      void reply
        .code(code)
        .send({ code, message: code >= 500 ? 'internal error' : (err.message ?? 'bad request') });
    });
    for (const handler of this.#options.handlers) {
      const webhook = handler.path;
      const route: RouteSeries = {
        webhook,
        inFlight: this.#metrics.inFlight.series({ webhook }),
        latency: this.#metrics.latency.series({ webhook }),
        ok: this.#metrics.requests.series({ webhook, code: '200' }),
      };
      app.route({
        method: 'POST',
        url: handler.path,
        // One callback hook: an async hook costs a promise and a microtask per request, and onResponse /
        // onRequestAbort hooks would each add listeners per request for what the close event below covers.
        onRequest: (request, reply, done) => {
          const state: RequestState = {
            route,
            started: performance.now(),
            finished: false,
            forbidden: undefined,
            scanned: false,
          };
          (request as StatefulRequest)[STATE] = state;
          route.inFlight.inc();
          // The response's close event comes once in every case: after the answer was written, and when the
          // client left before (Fastify's onRequestAbort would miss one leaving while a review is pending).
          reply.raw.on('close', () =>
            this.#finish(state, reply.raw.writableFinished ? reply.statusCode : 499),
          );
          done();
        },
        // Not an async handler: #answer sends the answer itself, so Fastify need not adopt a promise.
        handler: (request, reply) => {
          try {
            this.#answer(handler, request, reply);
          } catch (err) {
            this.#fail(reply, err);
          }
        },
      });
    }
  }

  /**
   * Fastify's JSON parser without its prototype-poisoning refusal, and with the scan for such keys done
   * here, where the text is at hand: mayHoldPrototypeKey rules most bodies out without walking them.
   */
  #parseJson(request: FastifyRequest, text: string, done: (err: Error | null, body?: unknown) => void): void {
    if (text.length === 0) {
      done(new errorCodes.FST_ERR_CTP_EMPTY_JSON_BODY(), undefined);
      return;
    }
    let body: unknown;
    try {
      // A byte-order mark is tolerated, as Fastify's parser does.
      body = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    } catch {
      done(new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY(), undefined);
      return;
    }
    const state = (request as StatefulRequest)[STATE];
    if (state !== null) {
      state.forbidden = mayHoldPrototypeKey(text) ? prototypeKey(body) : undefined;
      state.scanned = true;
    }
    done(null, body);
  }

  #finish(state: RequestState, statusCode: number): void {
    if (state.finished) return;
    state.finished = true;
    const seconds = (performance.now() - state.started) / 1000;
    const { route } = state;
    route.inFlight.dec();
    route.latency.observe(seconds);
    (statusCode === 200
      ? route.ok
      : this.#metrics.requests.series({ webhook: route.webhook, code: String(statusCode) })
    ).inc();
  }

  /** An unexpected error: a 500 through the error handler, unless an answer went out already. */
  #fail(reply: FastifyReply, err: unknown): void {
    if (!reply.sent) reply.send(err instanceof Error ? err : new Error(String(err)));
  }

  /**
   * Not async: a well-formed review costs the handler's promise and one reaction to it, and nothing else
   * (the answer is sent from that reaction, or from the deadline's timer).
   */
  #answer(handler: AdmissionHandler, request: FastifyRequest, reply: FastifyReply): void {
    const body = request.body;
    const uid = usableUid(body);
    if (uid === undefined) {
      this.#metrics.rejections.inc({ reason: 'no-uid' });
      this.#closeIfDraining(reply);
      reply.code(400).send({ code: 400, message: 'AdmissionReview request.uid is missing or not usable' });
      return;
    }
    const apiVersion = answerApiVersion(body);
    const state = (request as StatefulRequest)[STATE];
    const forbidden = state?.scanned ? state.forbidden : prototypeKey(body);
    const scope = new ReviewScope(this.#options.logger, handler.path, uid);
    if (forbidden !== undefined) {
      const message = `malformed AdmissionReview: forbidden key ${JSON.stringify(forbidden)}`;
      this.#respond(reply, apiVersion, uid, scope, undefined, deny('malformed', message, 400));
      return;
    }
    // Zod runs only on a review the hand-written check rejects, to name what is wrong with it.
    let review: AdmissionReview;
    if (isAdmissionReview(body)) review = body;
    else {
      const parsed = admissionReviewSchema.safeParse(body);
      if (!parsed.success) {
        const message = `malformed AdmissionReview: ${describeIssues(parsed.error)}`;
        this.#respond(reply, apiVersion, uid, scope, undefined, deny('malformed', message, 400));
        return;
      }
      review = parsed.data;
    }
    const query = request.query as Record<string, unknown> | undefined;
    const budget = reviewBudgetMs(
      parseTimeoutQuery(query?.timeout),
      this.#options.maxReviewMs ?? LOCAL_TIMEOUT_MS,
    );
    this.#decide(handler, review.request, budget, scope, (decision) => {
      // Called from a promise reaction or a timer: an error here must not escape as an unhandled one.
      try {
        this.#respond(reply, apiVersion, uid, scope, review, decision);
      } catch (err) {
        this.#fail(reply, err);
      }
    });
  }

  #respond(
    reply: FastifyReply,
    apiVersion: AdmissionApiVersion,
    uid: string,
    scope: ReviewScope,
    review: AdmissionReview | undefined,
    decision: Decision,
  ): void {
    if (!decision.allowed) {
      this.#metrics.rejections.inc({ reason: decision.reason });
      const r = review?.request;
      scope.log?.info(
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
    this.#closeIfDraining(reply);
    // Serialized here, with the charset Fastify would add: a string with a full content type skips its
    // serializer lookup and content-type rewrite, and the bytes on the wire are the same.
    reply
      .code(200)
      .header('content-type', JSON_CONTENT_TYPE)
      .send(JSON.stringify(reviewResponse(apiVersion, uid, decision)));
  }

  /**
   * Runs the handler under the deadline and hands `answer` the decision, exactly once: whichever comes
   * first, the handler's or the deadline's. Every failure becomes a denial.
   */
  #decide(
    handler: AdmissionHandler,
    req: AdmissionRequest,
    budgetMs: number,
    scope: ReviewScope,
    answer: (decision: Decision) => void,
  ): void {
    let settled = false;
    const settle = (decision: Decision): void => {
      if (settled) return;
      settled = true;
      answer(decision);
    };
    const timer = this.#clock.setTimeout(() => {
      scope.expire(new Error('admission review deadline exceeded'));
      settle(deny('deadline', `admission review did not complete within ${Math.round(budgetMs)}ms`, 504));
    }, budgetMs);
    const failed = (err: unknown): void => {
      timer.cancel();
      if (scope.expired) {
        settle(deny('deadline', 'admission review deadline exceeded', 504));
        return;
      }
      this.#metrics.panics.inc();
      scope.log?.error({ err: describe(err) }, 'admission handler failed; denying');
      settle(deny('internal-error', `internal error: ${describe(err)}`, 500));
    };
    try {
      handler.review(req, scope).then((decision) => {
        timer.cancel();
        settle(decision);
      }, failed);
    } catch (err) {
      failed(err);
    }
  }
}
