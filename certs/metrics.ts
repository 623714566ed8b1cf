// Certificate metrics:
//   berth_webhook_certificate_reload_errors_total  failed loads, issuances or CA Secret syncs (the pair
//                                                   being served is kept)
//   berth_webhook_certificate_expiry_seconds        seconds until the serving certificate expires, computed
//                                                   at scrape time (0 while none is loaded)
//   berth_metrics_certificate_expiry_seconds        the same for the `--metrics-secure` listener's certificate
//                                                   (src/secure-metrics.ts)
import type { Counter, Registry } from 'prom-client';
import { getOrCreateCounter, getOrCreateGauge } from '../src/observability/metrics.ts';

export const RELOAD_ERRORS_METRIC = 'berth_webhook_certificate_reload_errors_total';
export const EXPIRY_METRIC = 'berth_webhook_certificate_expiry_seconds';
export const METRICS_EXPIRY_METRIC = 'berth_metrics_certificate_expiry_seconds';

/** An expiry gauge: its name and help. */
export interface ExpiryGauge {
  name: string;
  help: string;
}

const WEBHOOK_EXPIRY: ExpiryGauge = {
  name: EXPIRY_METRIC,
  help: 'Seconds until the webhook serving certificate expires (0 while none is loaded)',
};

export const METRICS_EXPIRY: ExpiryGauge = {
  name: METRICS_EXPIRY_METRIC,
  help: 'Seconds until the secure metrics serving certificate expires (0 while none is loaded)',
};

export function reloadErrorsCounter(registry: Registry): Counter {
  const counter = getOrCreateCounter(registry, {
    name: RELOAD_ERRORS_METRIC,
    help: 'Failed attempts to load, issue or refresh the webhook serving certificate (the current one is kept)',
  });
  counter.inc(0);
  return counter;
}

/** Seconds left on a serving certificate, undefined while there is none. */
export type ExpirySource = () => number | undefined;

/** Per registry, per gauge name: the sources the gauge reports. */
const sources = new WeakMap<Registry, Map<string, Set<ExpirySource>>>();

/**
 * Exposes `source` through the expiry gauge `gauge` of `registry` (by default the webhook's; the soonest
 * expiry when several providers share a registry). Returns the function that removes it.
 */
export function registerExpirySource(
  registry: Registry,
  source: ExpirySource,
  gauge: ExpiryGauge = WEBHOOK_EXPIRY,
): () => void {
  let byName = sources.get(registry);
  if (byName === undefined) {
    byName = new Map();
    sources.set(registry, byName);
  }
  let set = byName.get(gauge.name);
  if (set === undefined) {
    const created = new Set<ExpirySource>();
    set = created;
    byName.set(gauge.name, created);
    getOrCreateGauge(registry, {
      name: gauge.name,
      help: gauge.help,
      collect() {
        const left = [...created].map((s) => s()).filter((v): v is number => v !== undefined);
        this.set(left.length === 0 ? 0 : Math.min(...left));
      },
    });
  }
  set.add(source);
  return () => {
    set.delete(source);
  };
}
