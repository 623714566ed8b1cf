// Certificate metrics:
//   berth_webhook_certificate_reload_errors_total  failed loads, issuances or CA Secret syncs (the pair
//                                                   being served is kept)
//   berth_webhook_certificate_expiry_seconds        seconds until the serving certificate expires, computed
//                                                   at scrape time (0 while none is loaded)
import type { Counter, Registry } from 'prom-client';
import { getOrCreateCounter, getOrCreateGauge } from '../src/observability/metrics.ts';

export const RELOAD_ERRORS_METRIC = 'berth_webhook_certificate_reload_errors_total';
export const EXPIRY_METRIC = 'berth_webhook_certificate_expiry_seconds';

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

const sources = new WeakMap<Registry, Set<ExpirySource>>();

/**
 * Exposes `source` through the expiry gauge of `registry` (the soonest expiry when several providers share
 * a registry). Returns the function that removes it.
 */
export function registerExpirySource(registry: Registry, source: ExpirySource): () => void {
  let set = sources.get(registry);
  if (set === undefined) {
    const created = new Set<ExpirySource>();
    set = created;
    sources.set(registry, created);
    getOrCreateGauge(registry, {
      name: EXPIRY_METRIC,
      help: 'Seconds until the webhook serving certificate expires (0 while none is loaded)',
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
