// Metrics counted in plain numbers and turned into series only when scraped, for the admission hot path:
// prom-client validates and hashes the label object on every inc/observe (five calls per review), while
// here a caller takes a series once (per route, per label set) and then only adds to its numbers.
// Each metric is an object the prom-client Registry holds like its own: it calls `get()` for metrics(),
// getMetricsAsJSON() and the cluster aggregation, `reset()` for resetMetrics(), and reads `name`, `help`,
// `type`. The series, their order (first touched first, again after a reset), label order and values are
// those prom-client's Counter, Gauge and Histogram produce for the same calls (plain-metrics.test.ts
// compares the two).
import type { Metric, Registry } from 'prom-client';

type Labels<L extends string> = Readonly<Record<L, string>>;

/** One exported value, as prom-client's get() lists them (`le` is a bucket's upper bound). */
export interface PlainValue {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
}

/** What get() answers, the shape of prom-client's. */
export interface PlainMetricObject {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  values: PlainValue[];
  aggregator: 'sum';
}

/** One label set's numbers; on its first update since creation or reset it joins its metric's export. */
abstract class Series {
  readonly labels: Readonly<Record<string, string>>;
  /** Whether prom-client would hold this label set (it has been updated since creation or reset). */
  protected touched = false;
  readonly #exported: Series[];

  constructor(labels: Readonly<Record<string, string>>, exported: Series[]) {
    this.labels = labels;
    this.#exported = exported;
  }

  protected touch(): void {
    this.touched = true;
    this.#exported.push(this);
  }

  /** Back to prom-client's state after reset(): no numbers, not exported. */
  clear(): void {
    this.touched = false;
  }
}

/** A series with one number: a counter's, or a gauge's. */
abstract class ValueSeries extends Series {
  value = 0;

  inc(): void {
    if (!this.touched) this.touch();
    this.value++;
  }

  override clear(): void {
    super.clear();
    this.value = 0;
  }
}

export class CounterSeries extends ValueSeries {}

export class GaugeSeries extends ValueSeries {
  dec(): void {
    if (!this.touched) this.touch();
    this.value--;
  }
}

export class HistogramSeries extends Series {
  /** Observations per bucket (not cumulative); one past the last bound counts those above every bound. */
  readonly counts: number[];
  sum = 0;
  count = 0;
  readonly #bounds: readonly number[];

  constructor(labels: Readonly<Record<string, string>>, exported: Series[], bounds: readonly number[]) {
    super(labels, exported);
    this.#bounds = bounds;
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }

  observe(value: number): void {
    if (!this.touched) this.touch();
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }

  override clear(): void {
    super.clear();
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}

interface Config<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
}

abstract class PlainMetric<L extends string, S extends Series> {
  /** Not readonly: an OpenMetrics registry strips a counter's `_total` in place, as it does prom-client's. */
  name: string;
  readonly help: string;
  abstract readonly type: 'counter' | 'gauge' | 'histogram';
  readonly labelNames: readonly L[];
  /** How a cluster's AggregatorRegistry combines workers' values (prom-client's default). */
  readonly aggregator = 'sum' as const;
  /** Series updated since creation or the last reset, first touched first. */
  protected readonly exported: S[] = [];
  readonly #series = new Map<string, S>();

  constructor(config: Config<L>) {
    // prom-client exports an unlabelled metric at 0 from the start; these only do labelled ones.
    if (config.labelNames.length === 0) throw new Error(`metric ${config.name}: plain metrics need labels`);
    this.name = config.name;
    this.help = config.help;
    this.labelNames = config.labelNames;
  }

  /** The series of one label set, made on first request: take it once and keep it off the hot path. */
  series(labels: Labels<L>): S {
    const key = this.labelNames.map((n) => labels[n]).join('\u0000');
    let s = this.#series.get(key);
    if (s === undefined) {
      // In label-name order: prom-client keeps its caller's order, and the admission code passed this one.
      const ordered: Record<string, string> = {};
      for (const n of this.labelNames) ordered[n] = labels[n];
      s = this.create(ordered, this.exported as Series[]);
      this.#series.set(key, s);
    }
    return s;
  }

  protected abstract create(labels: Record<string, string>, exported: Series[]): S;

  reset(): void {
    for (const s of this.#series.values()) s.clear();
    this.exported.length = 0;
  }

  abstract values(): PlainValue[];

  async get(): Promise<PlainMetricObject> {
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values: this.values(),
      aggregator: this.aggregator,
    };
  }
}

/** A metric whose series each export one value: counters and gauges. */
abstract class PlainValueMetric<L extends string, S extends ValueSeries> extends PlainMetric<L, S> {
  values(): PlainValue[] {
    return this.exported.map((s) => ({ value: s.value, labels: { ...s.labels } }));
  }
}

export class PlainCounter<L extends string> extends PlainValueMetric<L, CounterSeries> {
  readonly type = 'counter';

  protected create(labels: Record<string, string>, exported: Series[]): CounterSeries {
    return new CounterSeries(labels, exported);
  }
}

export class PlainGauge<L extends string> extends PlainValueMetric<L, GaugeSeries> {
  readonly type = 'gauge';

  protected create(labels: Record<string, string>, exported: Series[]): GaugeSeries {
    return new GaugeSeries(labels, exported);
  }
}

export class PlainHistogram<L extends string> extends PlainMetric<L, HistogramSeries> {
  readonly type = 'histogram';
  readonly buckets: readonly number[];

  constructor(config: Config<L> & { buckets: readonly number[] }) {
    super(config);
    this.buckets = [...config.buckets];
  }

  protected create(labels: Record<string, string>, exported: Series[]): HistogramSeries {
    return new HistogramSeries(labels, exported, this.buckets);
  }

  /** As prom-client's Histogram: cumulative buckets `le` first, then +Inf, `_sum` and `_count`. */
  values(): PlainValue[] {
    const bucket = `${this.name}_bucket`;
    const out: PlainValue[] = [];
    for (const s of this.exported) {
      let cumulative = 0;
      this.buckets.forEach((bound, i) => {
        cumulative += s.counts[i]!;
        out.push({ value: cumulative, metricName: bucket, labels: { le: bound, ...s.labels } });
      });
      out.push(
        { value: s.count, metricName: bucket, labels: { le: '+Inf', ...s.labels } },
        { value: s.sum, metricName: `${this.name}_sum`, labels: { ...s.labels } },
        { value: s.count, metricName: `${this.name}_count`, labels: { ...s.labels } },
      );
    }
    return out;
  }
}

type AnyPlain = PlainCounter<string> | PlainGauge<string> | PlainHistogram<string>;

/**
 * The metric registered under `metric.name`, or `metric` once registered: components sharing a registry
 * share series. A name held by another kind or with other labels is a programming error, as in
 * src/observability/metrics.ts.
 */
function getOrRegister<M extends AnyPlain>(registry: Registry, metric: M): M {
  const existing: unknown = registry.getSingleMetric(metric.name);
  if (existing === undefined) {
    // The registry only calls get(), reset() and reads name/help/type, which these provide; its typings
    // list prom-client's own classes only.
    registry.registerMetric(metric as unknown as Metric<string>);
    return metric;
  }
  if (!(existing instanceof metric.constructor) || (existing as AnyPlain).type !== metric.type)
    throw new Error(`metric ${metric.name} is already registered as a different type`);
  const have = [...(existing as AnyPlain).labelNames].sort().join(',');
  const want = [...metric.labelNames].sort().join(',');
  if (have !== want)
    throw new Error(`metric ${metric.name} is already registered with labels [${have}], not [${want}]`);
  return existing as M;
}

export const plainCounter = <L extends string>(registry: Registry, config: Config<L>): PlainCounter<L> =>
  getOrRegister(registry, new PlainCounter(config));

export const plainGauge = <L extends string>(registry: Registry, config: Config<L>): PlainGauge<L> =>
  getOrRegister(registry, new PlainGauge(config));

export const plainHistogram = <L extends string>(
  registry: Registry,
  config: Config<L> & { buckets: readonly number[] },
): PlainHistogram<L> => getOrRegister(registry, new PlainHistogram(config));
