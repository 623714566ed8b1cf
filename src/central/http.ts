// The central lease API's request handler (docs/behaviour.md §3.3-§3.5) over node:http(s):
// logging and metrics around routing; lease routes run auth -> body -> holder -> ttl/token -> authz ->
// key -> manager, in exactly that order, so key validation can never serve as a pre-auth oracle.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../observability/logger.ts';
import {
  type Authenticator,
  AuthMessage,
  authorize,
  bearerToken,
  type Identity,
  isUsableIdentity,
} from './auth.ts';
import { type LeaseManager, ReleaseConflictError } from './manager.ts';
import type { CentralMetrics, LeaseOutcome } from './metrics.ts';
import { decodeBody, MAX_BODY_BYTES, type Operation, validateKey, validateRequest } from './validate.ts';
import { type ErrorBody, leaseResponseBody } from './wire.ts';

export interface CentralHandlerOptions {
  manager: LeaseManager;
  /** Undefined in `none` mode: no identity, authorization skipped. */
  authenticator: Authenticator | undefined;
  /** Readiness (the cached store probe); always ready when omitted. */
  ready?: () => Promise<boolean>;
  metrics: CentralMetrics;
  logger: Logger;
}

export type Route = 'acquire' | 'renew' | 'release' | 'healthz' | 'readyz' | 'unmatched';

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The W3C trace id of an inbound traceparent, else a fresh random id. */
export function requestIdFor(traceparent: string | string[] | undefined): string {
  const match = typeof traceparent === 'string' ? TRACEPARENT.exec(traceparent.trim()) : null;
  const traceId = match?.[1];
  if (traceId !== undefined && !/^0+$/.test(traceId)) return traceId;
  return randomBytes(16).toString('hex');
}

type Match =
  | { route: 'healthz' | 'readyz' }
  | { route: Operation; namespace: string; name: string }
  | { route: 'unmatched'; status: 400 | 404 };

const OPERATIONS = new Set<string>(['acquire', 'renew', 'release']);

/** Routes a raw request path like Go's ServeMux: wildcards match one escaped segment, then are unescaped. */
export function matchRoute(rawUrl: string): Match {
  const path = rawUrl.split('?', 1)[0] ?? '';
  if (path === '/healthz') return { route: 'healthz' };
  if (path === '/readyz') return { route: 'readyz' };
  const parts = path.split('/');
  if (
    parts.length === 7 &&
    parts[0] === '' &&
    parts[1] === 'v1alpha1' &&
    parts[2] === 'namespaces' &&
    parts[4] === 'leases' &&
    OPERATIONS.has(parts[6]!) &&
    parts[3] !== '' &&
    parts[5] !== ''
  ) {
    try {
      return {
        route: parts[6] as Operation,
        namespace: decodeURIComponent(parts[3]!),
        name: decodeURIComponent(parts[5]!),
      };
    } catch {
      return { route: 'unmatched', status: 400 };
    }
  }
  return { route: 'unmatched', status: 404 };
}

function sendText(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'x-content-type-options': 'nosniff',
    ...headers,
  });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(`${JSON.stringify(body)}\n`);
}

type BodyResult = { ok: true; text: string } | { ok: false; status: 400 | 413 };

/** Reads at most MAX_BODY_BYTES; more is a 413 whatever the Content-Length said. */
function readBody(req: IncomingMessage): Promise<BodyResult> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
    req.resume(); // discard: the response closes the connection
    return Promise.resolve({ ok: false, status: 413 });
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (result: BodyResult): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        finish({ ok: false, status: 413 }); // the rest is discarded (the stream keeps flowing)
      } else chunks.push(chunk);
    };
    const onEnd = (): void => finish({ ok: true, text: Buffer.concat(chunks).toString('utf8') });
    const onError = (): void => finish({ ok: false, status: 400 });
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

export function createCentralHandler(
  options: CentralHandlerOptions,
): (req: IncomingMessage, res: ServerResponse) => void {
  const { manager, authenticator, metrics, logger } = options;

  const outcome = (o: LeaseOutcome): void => metrics.outcomes.inc({ outcome: o });

  async function serveLease(
    req: IncomingMessage,
    res: ServerResponse,
    match: { route: Operation; namespace: string; name: string },
    requestId: string,
    log: Logger,
  ): Promise<void> {
    const fail = (status: number, message: string, extra: Record<string, string> = {}): void => {
      const body: ErrorBody = { error: message };
      if (status >= 500) body.requestId = requestId;
      sendJson(res, status, body, extra);
    };

    // 1. Authentication.
    let identity: Identity | undefined;
    if (authenticator !== undefined) {
      const token = bearerToken(req.headers.authorization);
      if (token === undefined) {
        outcome('unauthorized');
        fail(401, AuthMessage.malformed, { 'www-authenticate': 'Bearer' });
        return;
      }
      try {
        identity = await authenticator.authenticate(token);
      } catch (err) {
        // One line per refused request: the reason tells a bad token from an unreachable issuer.
        log.warn({ reason: err instanceof Error ? err.message : String(err) }, 'authentication failed');
        identity = undefined;
      }
      if (!isUsableIdentity(identity)) {
        outcome('unauthorized');
        fail(401, AuthMessage.unauthorized, { 'www-authenticate': 'Bearer' });
        return;
      }
    }

    // 2. Body.
    const body = await readBody(req);
    if (!body.ok) {
      if (body.status === 413) {
        // The rest of the body is discarded unread: the connection cannot be reused.
        res.shouldKeepAlive = false;
        fail(413, `request body must be at most ${MAX_BODY_BYTES} bytes`, { connection: 'close' });
      } else fail(400, 'could not read request body');
      return;
    }
    const decoded = decodeBody(body.text, match.route);
    if (!decoded.ok) {
      fail(400, decoded.message);
      return;
    }

    // 3-4. Holder, ttl, token.
    const request = validateRequest(match.route, decoded.value);
    if (!request.ok) {
      fail(400, request.message);
      return;
    }
    const { holder, ttlSeconds, fencingToken } = request.value;

    // 5. Authorization (only with an identity).
    if (identity !== undefined) {
      const denied = authorize(identity, match.namespace, holder);
      if (denied !== undefined) {
        outcome('unauthorized');
        fail(403, denied);
        return;
      }
    }

    // 6. Key.
    const keyError = validateKey(match.namespace, match.name);
    if (keyError !== undefined) {
      outcome('invalid-key');
      fail(400, keyError);
      return;
    }

    // 7. Manager.
    const key = { namespace: match.namespace, name: match.name };
    try {
      switch (match.route) {
        case 'acquire': {
          const result = await manager.acquire(key, holder, ttlSeconds * 1000);
          outcome(result.acquired ? 'acquired' : 'held-by-other');
          sendJson(res, 200, leaseResponseBody(result));
          return;
        }
        case 'renew': {
          const result = await manager.renew(key, holder, fencingToken, ttlSeconds * 1000);
          outcome(result.acquired ? 'renewed' : 'held-by-other');
          sendJson(res, 200, leaseResponseBody(result));
          return;
        }
        case 'release':
          await manager.release(key, holder, fencingToken);
          outcome('released');
          res.writeHead(204);
          res.end();
          return;
      }
    } catch (err) {
      if (err instanceof ReleaseConflictError) {
        outcome('conflict');
        fail(409, 'lease held by another identity or token');
        return;
      }
      outcome('error');
      log.error({ err, namespace: key.namespace, name: key.name }, 'lease operation failed');
      fail(500, 'internal error');
    }
  }

  async function serve(
    req: IncomingMessage,
    res: ServerResponse,
    match: Match,
    requestId: string,
    log: Logger,
  ) {
    const method = req.method ?? 'GET';
    switch (match.route) {
      case 'healthz':
      case 'readyz': {
        if (method !== 'GET' && method !== 'HEAD') {
          sendText(res, 405, 'Method Not Allowed\n', { allow: 'GET, HEAD' });
          return;
        }
        if (match.route === 'healthz') sendText(res, 200, 'ok\n');
        else if (await (options.ready?.() ?? Promise.resolve(true))) sendText(res, 200, 'ok\n');
        else sendText(res, 503, 'not ready\n');
        return;
      }
      case 'unmatched':
        if (match.status === 400) sendText(res, 400, '400 Bad Request\n');
        else sendText(res, 404, '404 page not found\n');
        return;
      default:
        if (method !== 'POST') {
          sendText(res, 405, 'Method Not Allowed\n', { allow: 'POST' });
          return;
        }
        await serveLease(req, res, match, requestId, log);
    }
  }

  return (req, res) => {
    const requestId = requestIdFor(req.headers.traceparent);
    res.setHeader('x-request-id', requestId);
    const match = matchRoute(req.url ?? '/');
    const route: Route = match.route;
    const method = req.method ?? 'GET';
    const log = logger.child({ requestId });
    metrics.inflight.inc();
    const endTimer = metrics.requestDuration.startTimer({ route, method });
    const started = process.hrtime.bigint();
    let recorded = false;
    const record = (): void => {
      if (recorded) return;
      recorded = true;
      metrics.inflight.dec();
      const status = String(res.statusCode);
      endTimer({ status });
      metrics.requests.inc({ route, method, status });
      const fields = {
        method,
        route,
        path: (req.url ?? '/').split('?', 1)[0],
        status: res.statusCode,
        durationMs: Number(process.hrtime.bigint() - started) / 1e6,
      };
      if (route === 'healthz' || route === 'readyz') log.debug(fields, 'request');
      else log.info(fields, 'request');
    };
    res.once('finish', record);
    res.once('close', record);
    serve(req, res, match, requestId, log).catch((err: unknown) => {
      log.error({ err }, 'request handler failed');
      if (!res.headersSent) sendJson(res, 500, { error: 'internal error', requestId } satisfies ErrorBody);
      else res.destroy();
    });
  };
}
