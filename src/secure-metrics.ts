// `--metrics-secure`: the pieces of the secure metrics listener, for the composition root (run.ts).
// Its serving certificate comes from `--metrics-cert-dir` (tls.crt/tls.key, hot-reloaded by
// certs/files.ts) or, without one, is generated in memory (certs/ephemeral.ts), as controller-runtime
// does; each scrape is authorized by src/observability/metrics-auth.ts with reviews sent through a
// transport of its own, whose short timeout bounds a scrape while the API server does not answer.
// The listener binds with the probe server, before the certificate exists: until the provider (a
// runnable of the first start group) has one, TLS handshakes fail, and readiness does not wait for it.
import { createServer, type Server as HttpsServer } from 'node:https';
import type { SecureContextOptions } from 'node:tls';
import type { Registry } from 'prom-client';
import { EphemeralCertificateProvider } from '../certs/ephemeral.ts';
import { FilesCertificateProvider } from '../certs/files.ts';
import { METRICS_EXPIRY, registerExpirySource } from '../certs/metrics.ts';
import type { CertificateProvider } from '../certs/provider.ts';
import { attachToTlsServer } from '../certs/tls-server.ts';
import { reviewNonResourceAccess, reviewToken } from './kube/access-review.ts';
import { type Clock, realClock } from './kube/clock.ts';
import type { Runnable } from './kube/manager.ts';
import { METRICS_ACCESS, ScrapeAuthorizer, type ScrapeCacheTtls } from './kube/metrics-auth.ts';
import type { KubeRequester } from './kube/transport.ts';
import type { MetricsSecurity } from './observability/health.ts';
import type { Logger } from './observability/logger.ts';

/** As controller-runtime's TokenAccessReviewTimeout; Prometheus gives a scrape 10 s by default too. */
export const REVIEW_TIMEOUT_MS = 10_000;
const TLS_OPTIONS: SecureContextOptions = { minVersion: 'TLSv1.2' };
/** Node's default lets a connection that never finishes its handshake live 120 s. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

export interface SecureMetricsOptions {
  /** `--metrics-cert-dir`; empty: a self-signed certificate in memory. */
  certDir: string;
  /** The process's API transport; each review is bounded by REVIEW_TIMEOUT_MS. */
  transport: KubeRequester;
  logger: Logger;
  clock?: Clock;
  ttls?: ScrapeCacheTtls;
  /** Where `berth_metrics_certificate_expiry_seconds` is exported (the registry the listener serves). */
  registry?: Registry;
}

export interface SecureMetrics {
  /** For the probe server (ManagerOptions.metricsSecurity). */
  security: MetricsSecurity;
  /** Runs the certificate provider; closes the reviews' transport on stop. */
  runnable: Runnable;
}

export function secureMetrics(options: SecureMetricsOptions): SecureMetrics {
  const logger = options.logger.child({ server: 'metrics' });
  const clock = options.clock ? { clock: options.clock } : {};
  const provider: CertificateProvider =
    options.certDir === ''
      ? new EphemeralCertificateProvider({
          dnsNames: ['localhost'],
          caName: 'berth-operator-metrics-ca',
          logger,
          ...clock,
        })
      : new FilesCertificateProvider({ dir: options.certDir, logger, ...clock });
  if (options.registry !== undefined) {
    const now = options.clock ?? realClock;
    registerExpirySource(
      options.registry,
      () => {
        const expiry = provider.expiry();
        return expiry === undefined ? undefined : (expiry.getTime() - now.now()) / 1000;
      },
      METRICS_EXPIRY,
    );
  }
  const transport: KubeRequester = {
    request: (req) => options.transport.request({ ...req, timeoutMs: REVIEW_TIMEOUT_MS }),
  };
  const authorizer = new ScrapeAuthorizer({
    reviewer: {
      reviewToken: (token) => reviewToken(transport, token),
      reviewAccess: (user) => reviewNonResourceAccess(transport, user, METRICS_ACCESS),
    },
    logger,
    ...clock,
    ...(options.ttls ? { ttls: options.ttls } : {}),
  });
  const security: MetricsSecurity = {
    createServer: (listener) => {
      const pair = provider.current();
      const server: HttpsServer = createServer(
        {
          ...TLS_OPTIONS,
          ...(pair ? { cert: pair.cert, key: pair.key } : {}),
          handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
        },
        listener,
      );
      server.once('close', attachToTlsServer(provider, server, TLS_OPTIONS, logger));
      return server;
    },
    authorize: (authorization) => authorizer.authorize(authorization),
  };
  return {
    security,
    runnable: {
      name: 'metrics-certificate',
      needLeaderElection: false,
      group: 'certificates',
      start: (signal) => provider.start(signal),
      stop: () => provider.stop(),
    },
  };
}
