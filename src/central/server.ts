// startCentralServer(): the embedded central lease API (HTTPS, or plain HTTP when no certificate is
// given, for tests), its TTL collector, the cached readiness probe and an optional plain-HTTP metrics
// listener. Used by `berth-operator central`, by tests, and by `npm start`'s local system.
import type { Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Registry } from 'prom-client';
import { type Clock, realClock } from '../kube/clock.ts';
import { ProbeServer, parseBindAddress } from '../observability/health.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { createRegistry } from '../observability/metrics.ts';
import { type Authenticator, type AuthMode, StaticKeyAuthenticator } from './auth.ts';
import { TtlCollector } from './gc.ts';
import { createCentralHandler } from './http.ts';
import { LeaseManager } from './manager.ts';
import { MemoryStore } from './memstore.ts';
import { centralMetrics, certificateExpiryGauge, instrumentStore } from './metrics.ts';
import { OidcAuthenticator, type OidcConfig } from './oidc.ts';
import { CachedProbe } from './readiness.ts';
import type { Store } from './store.ts';

export const READ_HEADER_TIMEOUT_MS = 5_000;
export const SHUTDOWN_GRACE_MS = 5_000;

export interface CentralServerOptions {
  /** `[host]:port`; port 0 picks a free one. Default `127.0.0.1:0`. */
  listen?: string;
  /** PEM serving certificate and key: HTTPS only, as the clients accept nothing else (docs/behaviour.md §3.9). */
  tls: { cert: string | Buffer; key: string | Buffer };
  /** Default `none`. */
  authMode?: AuthMode;
  /** Key file for `static-keys`. */
  apiKeysFile?: string;
  /** Issuer and claims for `oidc` (the other modes ignore it). */
  oidc?: OidcConfig;
  /** Overrides authMode/apiKeysFile/oidc (tests). */
  authenticator?: Authenticator;
  /** Default: a new MemoryStore. */
  store?: Store;
  clock?: Clock;
  logger?: Logger;
  /** Default: a new registry with the process metrics. */
  registry?: Registry;
  /** Plain-HTTP `/metrics` + `/healthz` listener; '' or '0' (the default here) disables it. */
  metricsAddr?: string;
  /** TTL collector settings; false disables it. */
  gc?: { intervalMs?: number; graceMs?: number } | false;
  /** Readiness probe cache and timeout (defaults 1 s / 2 s). */
  readiness?: { ttlMs?: number; timeoutMs?: number };
}

export interface CentralServer {
  /** e.g. `https://127.0.0.1:8443` (a wildcard bind is reported as loopback). */
  url: string;
  port: number;
  /** The metrics listener's URL when enabled. */
  metricsUrl: string | undefined;
  manager: LeaseManager;
  store: Store;
  collector: TtlCollector | undefined;
  registry: Registry;
  /** Re-reads the static key file (what SIGHUP does); false when it failed and the old keys stay. */
  reloadKeys(): Promise<boolean>;
  stop(): Promise<void>;
}

async function buildAuthenticator(
  options: CentralServerOptions,
  clock: Clock,
  logger: Logger,
): Promise<{ authenticator: Authenticator | undefined; reload: () => Promise<boolean>; close: () => void }> {
  const close = (): void => {};
  if (options.authenticator !== undefined)
    return { authenticator: options.authenticator, reload: async () => true, close };
  const mode = options.authMode ?? 'none';
  if (mode === 'none') {
    logger.warn('authentication is disabled (auth mode "none"): any client can take or release any lease');
    return { authenticator: undefined, reload: async () => true, close };
  }
  if (mode === 'oidc') {
    if (options.oidc === undefined) throw new Error('auth mode oidc requires the OIDC issuer settings');
    const oidc = await OidcAuthenticator.start(options.oidc, clock, logger);
    return { authenticator: oidc, reload: async () => true, close: () => oidc.close() };
  }
  if (!options.apiKeysFile)
    throw new Error('auth mode static-keys requires an API keys file (--api-keys-file)');
  const keys = await StaticKeyAuthenticator.load(options.apiKeysFile, logger);
  logger.info({ path: options.apiKeysFile, keys: keys.size }, 'loaded API keys');
  return { authenticator: keys, reload: () => keys.reload(), close };
}

function listen(server: Server, host: string, port: number): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host === '' ? undefined : host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

function urlHost(info: AddressInfo): string {
  const wildcard = info.address === '0.0.0.0' || info.address === '::';
  const host = wildcard ? (info.family === 'IPv6' ? '::1' : '127.0.0.1') : info.address;
  return host.includes(':') ? `[${host}]` : host;
}

export async function startCentralServer(options: CentralServerOptions): Promise<CentralServer> {
  const clock = options.clock ?? realClock;
  const logger = options.logger ?? createLogger({ name: 'central' });
  const registry = options.registry ?? createRegistry();
  const metrics = centralMetrics(registry);
  certificateExpiryGauge(registry, options.tls.cert, clock);
  const bind = parseBindAddress(options.listen ?? '127.0.0.1:0');
  if (bind === undefined) throw new Error(`invalid listen address "${options.listen}": want [host]:port`);
  const auth = await buildAuthenticator(options, clock, logger);

  const rawStore: Store = options.store ?? new MemoryStore();
  const store = instrumentStore(rawStore, metrics);
  const manager = new LeaseManager({ store, clock });
  const probe = new CachedProbe({
    probe: (signal) => store.ping(signal),
    clock,
    ttlMs: options.readiness?.ttlMs,
    timeoutMs: options.readiness?.timeoutMs,
  });
  const handler = createCentralHandler({
    manager,
    authenticator: auth.authenticator,
    ready: () => probe.check(),
    metrics,
    logger,
  });

  const server: Server = createHttpsServer(
    { cert: options.tls.cert, key: options.tls.key, minVersion: 'TLSv1.2' },
    handler,
  );
  server.headersTimeout = READ_HEADER_TIMEOUT_MS;
  server.requestTimeout = 30_000;
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('tlsClientError', (err) => logger.debug({ err: err.message }, 'TLS handshake failed'));

  const info = await listen(server, bind.host, bind.port).catch((err: unknown) => {
    auth.close();
    throw err;
  });
  const url = `https://${urlHost(info)}:${info.port}`;

  let probes: ProbeServer | undefined;
  let metricsUrl: string | undefined;
  let collector: TtlCollector | undefined;
  try {
    const metricsBind = parseBindAddress(options.metricsAddr ?? '');
    if (metricsBind !== undefined) {
      probes = new ProbeServer({
        healthProbeBindAddress: options.metricsAddr,
        metricsBindAddress: options.metricsAddr,
        registry,
        logger,
        clock,
      });
      metricsUrl = (await probes.start()).metrics?.url;
    }
    if (options.gc !== false) {
      collector = new TtlCollector({
        store,
        clock,
        intervalMs: options.gc?.intervalMs,
        graceMs: options.gc?.graceMs,
        logger,
      });
      collector.start();
    }
  } catch (err) {
    server.close();
    server.closeAllConnections();
    await probes?.stop();
    auth.close();
    throw err;
  }
  logger.info({ url, metricsUrl, store: store.backend }, 'central lease API serving');

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await collector?.stop();
      await new Promise<void>((resolve) => {
        const force = clock.setTimeout(() => {
          logger.warn('graceful shutdown timed out; closing open connections');
          server.closeAllConnections();
          for (const socket of sockets) socket.destroy();
        }, SHUTDOWN_GRACE_MS);
        server.close(() => {
          force.cancel();
          resolve();
        });
        server.closeIdleConnections();
      });
      await probes?.stop();
      auth.close();
      await rawStore.close?.();
      logger.info('central lease API stopped');
    })();
    return stopping;
  };

  return {
    url,
    port: info.port,
    metricsUrl,
    manager,
    store,
    collector,
    registry,
    reloadKeys: auth.reload,
    stop,
  };
}
