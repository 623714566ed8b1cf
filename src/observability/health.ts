// Health probes and metrics, like controller-runtime's probe and metrics servers: /healthz and /livez
// (liveness), /readyz (readiness), each with /<endpoint>/<check>, `?verbose` and `?exclude=<check>`, over
// plain HTTP, and /metrics from the registry, over plain HTTP too unless `--metrics-secure` gives it
// HTTPS and an authorization per scrape (MetricsSecurity; docs/metrics.md). Probes run on every replica,
// so checks must be cheap: report cached state, do not call the API server.
import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { type Clock, realClock, type Timer } from '../kube/clock.ts';
import type { Logger } from './logger.ts';
import { scrubSecrets } from './logger.ts';

/** Passes by returning; fails by throwing (the error message is the reason shown by `?verbose`). */
export type HealthCheck = () => void | Promise<void>;

export interface CheckResult {
  name: string;
  healthy: boolean;
  excluded?: boolean;
  reason?: string;
}

export type Endpoint = 'healthz' | 'livez' | 'readyz';

/** A check whose outcome is set from outside, e.g. readiness that fails first on SIGTERM. */
export interface ToggleCheck {
  readonly check: HealthCheck;
  fail(reason: string): void;
  pass(): void;
  readonly failing: boolean;
}

export function createToggleCheck(initialFailure?: string): ToggleCheck {
  let reason = initialFailure;
  return {
    check: () => {
      if (reason !== undefined) throw new Error(reason);
    },
    fail: (why) => {
      reason = why;
    },
    pass: () => {
      reason = undefined;
    },
    get failing() {
      return reason !== undefined;
    },
  };
}

const MAX_REASON = 200;

/** One line, no secrets, bounded: probe output is unauthenticated. */
export function sanitizeReason(reason: string): string {
  const line = scrubSecrets(reason).split(/\r?\n/, 1)[0] ?? '';
  return line.length > MAX_REASON ? `${line.slice(0, MAX_REASON)}...` : line;
}

/** Kubernetes-style aggregate body: `ok` when healthy and not verbose, otherwise one line per check. */
export function formatAggregate(
  endpoint: Endpoint,
  results: readonly CheckResult[],
  verbose: boolean,
  unknownExcludes: readonly string[] = [],
): { status: number; body: string } {
  const failed = results.some((r) => !r.healthy);
  if (!failed && !verbose) return { status: 200, body: 'ok' };
  const lines = [...results]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((r) => {
      if (r.excluded) return `[+]${r.name} excluded: ok`;
      if (r.healthy) return `[+]${r.name} ok`;
      return `[-]${r.name} failed: ${r.reason ?? 'reason withheld'}`;
    });
  if (unknownExcludes.length > 0) {
    lines.push(
      `warn: some health checks cannot be excluded: no matches for ${unknownExcludes.map((n) => `"${n}"`).join(',')}`,
    );
  }
  lines.push(`${endpoint} check ${failed ? 'failed' : 'passed'}`);
  return { status: failed ? 500 : 200, body: `${lines.join('\n')}\n` };
}

export interface BindAddress {
  /** Empty string means every interface. */
  host: string;
  port: number;
}

/** Parses a Go-style bind address (`:8081`, `127.0.0.1:0`, `[::1]:8080`); `0` or empty disables it. */
export function parseBindAddress(address: string): BindAddress | undefined {
  const trimmed = address.trim();
  if (trimmed === '' || trimmed === '0') return undefined;
  const match = /^(?:\[([^\]]*)\]|([^:[\]]*)):(\d{1,5})$/.exec(trimmed);
  const port = Number(match?.[3]);
  if (match === null || port > 65535) {
    throw new Error(`invalid bind address "${address}": want [host]:port, e.g. ":8080" or "127.0.0.1:8080"`);
  }
  return { host: match[1] ?? match[2] ?? '', port };
}

/**
 * Whether two bind addresses name one fixed listener (`:8080` and `0.0.0.0:8080` do; port 0 never does:
 * each bind gets a free port). False when either is disabled or invalid.
 */
export function sameFixedListener(a: string, b: string): boolean {
  try {
    const x = parseBindAddress(a);
    const y = parseBindAddress(b);
    return x !== undefined && y !== undefined && x.port !== 0 && sameAddress(x, y);
  } catch {
    return false;
  }
}

export interface BoundAddress {
  address: string;
  port: number;
  family: string;
  /** e.g. `http://127.0.0.1:8081` (a wildcard bind is reported as loopback, for local clients). */
  url: string;
}

/** What a secure metrics listener answers instead of the metrics (src/kube/metrics-auth.ts decides). */
export interface ScrapeRefusal {
  status: number;
  body: string;
  headers: Record<string, string>;
}

/** `--metrics-secure`: /metrics over HTTPS, every scrape authorized (built by src/secure-metrics.ts). */
export interface MetricsSecurity {
  /** The HTTPS server of the metrics listener; its certificate, and reloading it, are the creator's. */
  createServer(listener: RequestListener): HttpsServer;
  /** The refusal to send for a scrape with this Authorization header; undefined to serve the metrics. */
  authorize(authorization: string | undefined): Promise<ScrapeRefusal | undefined>;
}

export interface ProbeServerOptions {
  /** `--health-probe-bind-address`, default `:8081`; `0` disables. */
  healthProbeBindAddress?: string;
  /**
   * `--metrics-bind-address`, default `:8080`; `0` disables. An address equal to the probe address
   * (`127.0.0.1:0` twice included) shares one listener serving both, unless metrics are secure: the
   * probes stay plain HTTP (the kubelet's httpGet), so metrics then always get a listener of their own.
   */
  metricsBindAddress?: string;
  metricsSecurity?: MetricsSecurity;
  registry: Registry;
  logger?: Logger;
  /** A check slower than this fails (default 5 s): a hung check must not hang the kubelet's probe. */
  checkTimeoutMs?: number;
  clock?: Clock;
}

type Route = 'health' | 'metrics';

export class ProbeServer {
  readonly #checks: Record<Endpoint, Map<string, HealthCheck>>;
  readonly #options: ProbeServerOptions;
  readonly #clock: Clock;
  #servers: Array<Server | HttpsServer> = [];

  constructor(options: ProbeServerOptions) {
    this.#options = options;
    this.#clock = options.clock ?? realClock;
    // Liveness has one set of checks behind both /healthz (controller-runtime) and /livez (kube-apiserver).
    const liveness = new Map<string, HealthCheck>();
    this.#checks = { healthz: liveness, livez: liveness, readyz: new Map() };
  }

  /** Registers a liveness check (served under /healthz and /livez). Names are unique. */
  addHealthzCheck(name: string, check: HealthCheck): void {
    this.#add('healthz', name, check);
  }

  addReadyzCheck(name: string, check: HealthCheck): void {
    this.#add('readyz', name, check);
  }

  removeHealthzCheck(name: string): boolean {
    return this.#checks.healthz.delete(name);
  }

  removeReadyzCheck(name: string): boolean {
    return this.#checks.readyz.delete(name);
  }

  /** Runs every check of `endpoint` (excluded ones count as passing), each bounded by the check timeout. */
  async runChecks(endpoint: Endpoint, exclude: ReadonlySet<string> = new Set()): Promise<CheckResult[]> {
    const checks = this.#checks[endpoint];
    if (checks.size === 0) return [{ name: 'ping', healthy: true }];
    return Promise.all(
      [...checks].map(async ([name, check]): Promise<CheckResult> => {
        if (exclude.has(name)) return { name, healthy: true, excluded: true };
        const reason = await this.#run(check);
        return reason === undefined ? { name, healthy: true } : { name, healthy: false, reason };
      }),
    );
  }

  /** Binds the servers; resolves with their addresses (undefined when disabled). */
  async start(): Promise<{ health: BoundAddress | undefined; metrics: BoundAddress | undefined }> {
    if (this.#servers.length > 0) throw new Error('probe server already started');
    const health = parseBindAddress(this.#options.healthProbeBindAddress ?? ':8081');
    const metrics = parseBindAddress(this.#options.metricsBindAddress ?? ':8080');
    const secure = this.#options.metricsSecurity;
    const shared =
      secure === undefined && health !== undefined && metrics !== undefined && sameAddress(health, metrics);
    try {
      const healthBound = health && (await this.#listen(health, shared ? ['health', 'metrics'] : ['health']));
      const metricsBound = shared
        ? healthBound
        : metrics && (await this.#listen(metrics, ['metrics'], secure));
      return { health: healthBound, metrics: metricsBound };
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /** Closes the servers, dropping open (keep-alive) connections. */
  async stop(): Promise<void> {
    const servers = this.#servers.splice(0);
    await Promise.all(
      servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeAllConnections();
          }),
      ),
    );
  }

  #add(endpoint: Endpoint, name: string, check: HealthCheck): void {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) throw new Error(`invalid health check name "${name}"`);
    const checks = this.#checks[endpoint];
    if (checks.has(name)) throw new Error(`${endpoint} check "${name}" already exists`);
    checks.set(name, check);
  }

  async #run(check: HealthCheck): Promise<string | undefined> {
    const timeoutMs = this.#options.checkTimeoutMs ?? 5000;
    let timer: Timer | undefined;
    const timeout = new Promise<string>((resolve) => {
      timer = this.#clock.setTimeout(() => resolve(`timed out after ${timeoutMs}ms`), timeoutMs);
    });
    const outcome = (async (): Promise<string | undefined> => {
      try {
        await check();
        return undefined;
      } catch (err) {
        return sanitizeReason(err instanceof Error ? err.message : String(err));
      }
    })();
    try {
      return await Promise.race([outcome, timeout]);
    } finally {
      timer?.cancel();
    }
  }

  #listen(bind: BindAddress, routes: Route[], secure?: MetricsSecurity): Promise<BoundAddress> {
    const listener: RequestListener = (req, res) => {
      this.#handle(req, res, routes).catch((err: unknown) => {
        this.#options.logger?.error({ err }, 'probe server request failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('internal server error\n');
      });
    };
    const server = secure === undefined ? createServer(listener) : secure.createServer(listener);
    this.#servers.push(server);
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(bind.port, bind.host === '' ? undefined : bind.host, () => {
        server.off('error', reject);
        server.on('error', (err) => this.#options.logger?.error({ err }, 'probe server error'));
        const info = server.address() as AddressInfo;
        const host = wildcard(info.address) ? loopbackFor(info.family) : info.address;
        const urlHost = host.includes(':') ? `[${host}]` : host;
        resolve({
          address: info.address,
          port: info.port,
          family: info.family,
          url: `${secure === undefined ? 'http' : 'https'}://${urlHost}:${info.port}`,
        });
      });
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse, routes: Route[]): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://probe');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, 'method not allowed\n', { allow: 'GET, HEAD' });
      return;
    }
    const [first, name, ...rest] = url.pathname.split('/').filter((part) => part !== '');
    if (routes.includes('metrics') && first === 'metrics' && name === undefined) {
      const refusal = await this.#options.metricsSecurity?.authorize(req.headers.authorization);
      if (refusal !== undefined) {
        send(res, refusal.status, refusal.body, refusal.headers);
        return;
      }
      const body = await this.#options.registry.metrics();
      send(res, 200, body, { 'content-type': this.#options.registry.contentType });
      return;
    }
    if (!routes.includes('health') || !isEndpoint(first) || rest.length > 0) {
      send(res, 404, '404 page not found\n');
      return;
    }
    if (name !== undefined) {
      await this.#single(res, first, name);
      return;
    }
    const exclude = new Set(url.searchParams.getAll('exclude').flatMap((e) => e.split(',')));
    const results = await this.runChecks(first, exclude);
    const known = new Set(results.map((r) => r.name));
    const unknown = [...exclude].filter((e) => e !== '' && !known.has(e));
    const { status, body } = formatAggregate(first, results, url.searchParams.has('verbose'), unknown);
    if (status !== 200) {
      const failed = results.filter((r) => !r.healthy).map((r) => `${r.name}: ${r.reason ?? ''}`);
      this.#options.logger?.debug({ endpoint: first, failed }, `${first} check failed`);
    }
    send(res, status, body);
  }

  async #single(res: ServerResponse, endpoint: Endpoint, name: string): Promise<void> {
    const check = this.#checks[endpoint].get(name);
    if (check === undefined) {
      // As in controller-runtime, "ping" always exists when nothing is registered.
      if (name === 'ping' && this.#checks[endpoint].size === 0) send(res, 200, 'ok');
      else send(res, 404, '404 page not found\n');
      return;
    }
    const reason = await this.#run(check);
    if (reason === undefined) send(res, 200, 'ok');
    else send(res, 500, `internal server error: ${reason}\n`);
  }
}

function isEndpoint(value: string | undefined): value is Endpoint {
  return value === 'healthz' || value === 'livez' || value === 'readyz';
}

function send(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'x-content-type-options': 'nosniff',
    ...headers,
  });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

function wildcard(address: string): boolean {
  return address === '0.0.0.0' || address === '::';
}

function loopbackFor(family: string): string {
  return family === 'IPv6' ? '::1' : '127.0.0.1';
}

function sameAddress(a: BindAddress, b: BindAddress): boolean {
  const norm = (h: string): string => (h === '0.0.0.0' || h === '::' ? '' : h);
  return a.port === b.port && norm(a.host) === norm(b.host);
}
