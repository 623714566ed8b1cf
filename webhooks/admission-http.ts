// The admission HTTP handler (controller-runtime's admission/http.go): one AdmissionReview request in,
// one answer out, with the metrics of its route. The HTTPS server around it (TLS, timeouts, shutdown) is
// server.ts.
//
// The contract with the API server (failurePolicy Fail makes every misstep a denial, so none is left to
// chance): a body over 7 MiB gets 413, a non-JSON content type 415, unparsable JSON or a review without a
// usable uid 400; anything else gets HTTP 200 and a well-formed AdmissionReview in the request's apiVersion
// echoing the uid. A malformed review (a prototype-poisoning key such as `__proto__` included) is denied
// with code 400, a handler error with 500, a review that runs past its deadline (from `?timeout=`, at most
// 5 s) with 504; nothing that fails is ever allowed. While the server drains, every answer says
// `Connection: close`.
import type { Server as HttpsServer } from 'node:https';
import { errorCodes, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { parseDuration } from '../src/cli.ts';
import type { Clock } from '../src/kube/clock.ts';
import type { Logger } from '../src/observability/logger.ts';
import {
  type CounterSeries,
  countDenial,
  type GaugeSeries,
  type HistogramSeries,
  type WebhookMetrics,
} from './metrics.ts';
import {
  type AdmissionApiVersion,
  type AdmissionRequest,
  type AdmissionReview,
  admissionReviewSchema,
  answerApiVersion,
  type Decision,
  deny,
  describeIssues,
  prototypeKey,
  reviewResponse,
  usableUid,
} from './review.ts';

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

/** A positive Go duration, or undefined for anything else (then the handler uses its own maximum). */
function positiveDuration(value: string): number | undefined {
  try {
    const ms = parseDuration(value);
    return ms > 0 ? ms : undefined;
  } catch {
    return undefined;
  }
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
  const ms = positiveDuration(value);
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

/** An error as one line of at most 300 characters, for logs and denial messages. */
export const describeFailure = (err: unknown): string =>
  (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).split('\n', 1)[0]!.slice(0, 300);

export interface AdmissionHttpOptions {
  handlers: readonly AdmissionHandler[];
  metrics: WebhookMetrics;
  logger?: Logger | undefined;
  clock: Clock;
  /** Upper bound of one review's handler time. */
  maxReviewMs: number;
  /** True once a shutdown began: every answer then closes its connection. */
  draining(): boolean;
}

/** The routes of the admission server: parsing, the review's deadline, the answer and the metrics. */
export class AdmissionHttp {
  readonly #o: AdmissionHttpOptions;
  readonly #clock: Clock;
  readonly #metrics: WebhookMetrics;

  constructor(options: AdmissionHttpOptions) {
    this.#o = options;
    this.#clock = options.clock;
    this.#metrics = options.metrics;
  }

  /** While draining: the answer says `Connection: close`, and Node closes the connection after it. */
  #closeIfDraining(reply: FastifyReply): void {
    if (this.#o.draining()) reply.header('connection', 'close');
  }

  /** Adds the JSON parser, the error handler and one POST route per handler to `app`. */
  register(app: FastifyInstance<HttpsServer>): void {
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
        this.#o.logger?.error({ err: describeFailure(err), url: request.url }, 'admission request failed');
      this.#closeIfDraining(reply);
      void reply
        .code(code)
        .send({ code, message: code >= 500 ? 'internal error' : (err.message ?? 'bad request') });
    });
    for (const handler of this.#o.handlers) {
      const webhook = handler.path;
      const route: RouteSeries = {
        webhook,
        inFlight: this.#metrics.inFlight.labels({ webhook }),
        latency: this.#metrics.latency.labels({ webhook }),
        ok: this.#metrics.requests.labels({ webhook, code: '200' }),
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
   * Fastify's JSON parser without its prototype-poisoning refusal: #answer looks for such keys itself, so
   * that a review holding one still gets a well-formed denial.
   */
  #parseJson(
    _request: FastifyRequest,
    text: string,
    done: (err: Error | null, body?: unknown) => void,
  ): void {
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
      : this.#metrics.requests.labels({ webhook: route.webhook, code: String(statusCode) })
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
      countDenial(this.#metrics, handler.path, 'no-uid', '');
      this.#closeIfDraining(reply);
      reply.code(400).send({ code: 400, message: 'AdmissionReview request.uid is missing or not usable' });
      return;
    }
    const apiVersion = answerApiVersion(body);
    const forbidden = prototypeKey(body);
    const scope = new ReviewScope(this.#o.logger, handler.path, uid);
    if (forbidden !== undefined) {
      const message = `malformed AdmissionReview: forbidden key ${JSON.stringify(forbidden)}`;
      this.#respond(reply, apiVersion, uid, scope, undefined, deny('malformed', message, 400));
      return;
    }
    const parsed = admissionReviewSchema.safeParse(body);
    if (!parsed.success) {
      const message = `malformed AdmissionReview: ${describeIssues(parsed.error)}`;
      this.#respond(reply, apiVersion, uid, scope, undefined, deny('malformed', message, 400));
      return;
    }
    const review = parsed.data;
    const query = request.query as Record<string, unknown> | undefined;
    const budget = reviewBudgetMs(parseTimeoutQuery(query?.timeout), this.#o.maxReviewMs);
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
      const r = review?.request;
      const path =
        r === undefined
          ? ''
          : r.subResource
            ? `${r.resource.resource}/${r.subResource}`
            : r.resource.resource;
      countDenial(this.#metrics, scope.webhook, decision.reason, path);
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
      scope.log?.error({ err: describeFailure(err) }, 'admission handler failed; denying');
      settle(deny('internal-error', `internal error: ${describeFailure(err)}`, 500));
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
