// The informers' metrics: seconds since each running informer last heard from the API server (read at
// scrape time), watch restarts by reason, handler failures. One set per registry.
import type { Counter, Gauge, Registry } from 'prom-client';
import { getOrCreateCounter, getOrCreateGauge } from '../observability/metrics.ts';

interface LiveInformer {
  readonly name: string;
  secondsSinceLastEvent(): number;
}

export interface InformerMetrics {
  lastEvent: Gauge<'informer'>;
  restarts: Counter<'informer' | 'reason'>;
  handlerErrors: Counter<'informer'>;
  /** Running informers, read at scrape time. */
  live: Set<LiveInformer>;
}

const metricSets = new WeakMap<Registry, InformerMetrics>();

export function informerMetrics(registry: Registry): InformerMetrics {
  const cached = metricSets.get(registry);
  if (cached !== undefined) return cached;
  const live = new Set<LiveInformer>();
  const set: InformerMetrics = {
    lastEvent: getOrCreateGauge(registry, {
      name: 'berth_informer_last_event_seconds',
      help: 'Seconds since the informer last received anything from the API server (list, event or bookmark).',
      labelNames: ['informer'],
      collect() {
        for (const informer of live) this.set({ informer: informer.name }, informer.secondsSinceLastEvent());
      },
    }),
    restarts: getOrCreateCounter(registry, {
      name: 'berth_informer_watch_restarts_total',
      help: 'Watch restarts by reason: gone (410, relist), error, inactivity (silent stream replaced), closed.',
      labelNames: ['informer', 'reason'],
    }),
    handlerErrors: getOrCreateCounter(registry, {
      name: 'berth_informer_handler_errors_total',
      help: 'Event handler invocations that threw or rejected (the informer carried on).',
      labelNames: ['informer'],
    }),
    live,
  };
  metricSets.set(registry, set);
  return set;
}
