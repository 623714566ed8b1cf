// One prom-client Registry per process (never the global one, so tests and several components can each
// have their own), and get-or-create helpers so components that share a registry also share metrics.
import {
  Counter,
  type CounterConfiguration,
  collectDefaultMetrics,
  Gauge,
  type GaugeConfiguration,
  Histogram,
  type HistogramConfiguration,
  type Metric,
  Registry,
} from 'prom-client';

export interface RegistryOptions {
  /** Process and Node.js runtime metrics (process_cpu_seconds_total, nodejs_heap_*, ...). Default true. */
  defaultMetrics?: boolean;
}

export function createRegistry(options: RegistryOptions = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  return registry;
}

/** Prometheus exponential buckets, like Go's prometheus.ExponentialBuckets(start, factor, count). */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  const buckets: number[] = [];
  for (let i = 0; i < count; i++) buckets.push(start * factor ** i);
  return buckets;
}

type Config<C> = Omit<C, 'registers'>;

// A metric that is created with one shape and requested with another is a programming error: failing
// loudly beats two components silently writing incompatible series under one name.
function reuse<M extends Metric<string>>(
  registry: Registry,
  name: string,
  kind: abstract new (...args: never[]) => M,
  labelNames: readonly string[] | undefined,
): M | undefined {
  const existing = registry.getSingleMetric(name);
  if (existing === undefined) return undefined;
  if (!(existing instanceof kind)) {
    throw new Error(`metric ${name} is already registered as a different type`);
  }
  const have = [...((existing as { labelNames?: readonly string[] }).labelNames ?? [])].sort().join(',');
  const want = [...(labelNames ?? [])].sort().join(',');
  if (have !== want) {
    throw new Error(`metric ${name} is already registered with labels [${have}], not [${want}]`);
  }
  return existing;
}

export function getOrCreateCounter<L extends string>(
  registry: Registry,
  config: Config<CounterConfiguration<L>>,
): Counter<L> {
  const existing = reuse(registry, config.name, Counter, config.labelNames);
  return (existing as Counter<L> | undefined) ?? new Counter<L>({ ...config, registers: [registry] });
}

export function getOrCreateGauge<L extends string>(
  registry: Registry,
  config: Config<GaugeConfiguration<L>>,
): Gauge<L> {
  const existing = reuse(registry, config.name, Gauge, config.labelNames);
  return (existing as Gauge<L> | undefined) ?? new Gauge<L>({ ...config, registers: [registry] });
}

export function getOrCreateHistogram<L extends string>(
  registry: Registry,
  config: Config<HistogramConfiguration<L>>,
): Histogram<L> {
  const existing = reuse(registry, config.name, Histogram, config.labelNames);
  return (existing as Histogram<L> | undefined) ?? new Histogram<L>({ ...config, registers: [registry] });
}
