// The central server's metrics (docs/behaviour.md §3.10), created in an injected registry, a Store
// decorator that times every store call, and (not in the original) the serving certificate's expiry.
import { X509Certificate } from 'node:crypto';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Clock } from '../kube/clock.ts';
import {
  exponentialBuckets,
  getOrCreateCounter,
  getOrCreateGauge,
  getOrCreateHistogram,
} from '../observability/metrics.ts';
import type { LeaseKey, LeaseRecord } from './record.ts';
import { isStoreConflict, type Store } from './store.ts';

export type LeaseOutcome =
  | 'acquired'
  | 'held-by-other'
  | 'renewed'
  | 'released'
  | 'conflict'
  | 'unauthorized'
  | 'invalid-key'
  | 'error';

export interface CentralMetrics {
  requestDuration: Histogram<'route' | 'method' | 'status'>;
  requests: Counter<'route' | 'method' | 'status'>;
  inflight: Gauge;
  outcomes: Counter<'outcome'>;
  storeCallDuration: Histogram<'op' | 'backend' | 'outcome'>;
}

export function centralMetrics(registry: Registry): CentralMetrics {
  return {
    requestDuration: getOrCreateHistogram(registry, {
      name: 'berth_apiserver_request_duration_seconds',
      help: 'Duration of central lease API requests.',
      labelNames: ['route', 'method', 'status'],
    }),
    requests: getOrCreateCounter(registry, {
      name: 'berth_apiserver_requests_total',
      help: 'Central lease API requests by route, method and status code.',
      labelNames: ['route', 'method', 'status'],
    }),
    inflight: getOrCreateGauge(registry, {
      name: 'berth_apiserver_requests_inflight',
      help: 'Central lease API requests being served.',
    }),
    outcomes: getOrCreateCounter(registry, {
      name: 'berth_apiserver_lease_outcomes_total',
      help: 'Outcomes of lease operations.',
      labelNames: ['outcome'],
    }),
    storeCallDuration: getOrCreateHistogram(registry, {
      name: 'berth_lease_store_call_duration_seconds',
      help: 'Duration of lease store calls.',
      labelNames: ['op', 'backend', 'outcome'],
      buckets: exponentialBuckets(0.0001, 2, 16),
    }),
  };
}

/** Wraps a store so every call is observed in berth_lease_store_call_duration_seconds. */
export function instrumentStore(store: Store, metrics: CentralMetrics): Store {
  const timed = async <T>(op: string, call: () => Promise<T>, outcomeOf?: (v: T) => string): Promise<T> => {
    const end = metrics.storeCallDuration.startTimer({ op, backend: store.backend });
    try {
      const value = await call();
      end({ outcome: outcomeOf?.(value) ?? 'ok' });
      return value;
    } catch (err) {
      end({ outcome: isStoreConflict(err) ? 'conflict' : 'error' });
      throw err;
    }
  };
  return {
    backend: store.backend,
    ping: (signal) => timed('ping', () => store.ping(signal)),
    get: (key: LeaseKey) =>
      timed(
        'get',
        () => store.get(key),
        (r) => (r === undefined ? 'not_found' : 'ok'),
      ),
    list: () => timed('list', () => store.list()),
    put: (expectedVersion: number, record: LeaseRecord) =>
      timed('put', () => store.put(expectedVersion, record)),
    close: () => store.close?.() ?? Promise.resolve(),
  };
}

export const CERTIFICATE_EXPIRY_METRIC = 'berth_apiserver_certificate_expiry_seconds';

/**
 * `berth_apiserver_certificate_expiry_seconds`: seconds until the serving certificate (the first of the
 * PEM, the leaf) expires, computed at scrape time. The server reads its certificate once at start, so a
 * renewed Secret is served (and seen here) after a restart only. A certificate that cannot be parsed
 * exports nothing: the TLS server refuses it anyway.
 */
export function certificateExpiryGauge(registry: Registry, cert: string | Buffer, clock: Clock): void {
  let notAfter: number;
  try {
    notAfter = Date.parse(new X509Certificate(cert).validTo);
  } catch {
    return;
  }
  if (Number.isNaN(notAfter)) return;
  getOrCreateGauge(registry, {
    name: CERTIFICATE_EXPIRY_METRIC,
    help: 'Seconds until the central lease API serving certificate expires.',
    collect() {
      this.set((notAfter - clock.now()) / 1000);
    },
  });
}
