// The admission server: Fastify over HTTPS (TLS 1.2+), serving AdmissionReview handlers on every replica
// (controller-runtime's webhook/server.go). What one review's request and answer are is the admission
// HTTP handler's (admission-http.ts); this module is the server around it.
//
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
import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { LOCAL_TIMEOUT_MS } from '../src/berth/api.ts';
import { type Clock, realClock } from '../src/kube/clock.ts';
import type { HealthCheck } from '../src/observability/health.ts';
import type { Logger } from '../src/observability/logger.ts';
import { type AdmissionHandler, AdmissionHttp, describeFailure } from './admission-http.ts';
import { type WebhookMetrics, webhookMetrics } from './metrics.ts';

// The handler's types stay importable from the server, where handlers are registered.
export type { AdmissionHandler, ReviewContext } from './admission-http.ts';

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
      // JSON is parsed by the admission handler (admission-http.ts), which lets prototype-poisoning keys
      // through (JSON.parse defines them as own properties, no prototype is touched) so that it denies
      // such a review with a well-formed answer instead of the parser's bare 400.
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
    new AdmissionHttp({
      handlers: options.handlers,
      metrics: this.#metrics,
      logger: options.logger,
      clock: this.#clock,
      maxReviewMs: options.maxReviewMs ?? LOCAL_TIMEOUT_MS,
      draining: () => this.#draining,
    }).register(this.#app);
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

  #reloadCertificate(): void {
    try {
      this.#app.server.setSecureContext(tlsOptions(currentPair(this.#options.certificates)));
      this.#options.logger?.info('admission server certificate reloaded');
    } catch (err) {
      this.#metrics.certificateReloadErrors.inc();
      this.#options.logger?.error(
        { err: describeFailure(err) },
        'admission server kept its previous certificate',
      );
    }
  }
}
