import { Counter, Gauge, Histogram } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  createRegistry,
  exponentialBuckets,
  getOrCreateCounter,
  getOrCreateGauge,
  getOrCreateHistogram,
} from '../../../src/observability/metrics.ts';

describe('createRegistry', () => {
  it('includes process and Node.js metrics by default, and not in the global registry', async () => {
    const registry = createRegistry();
    const text = await registry.metrics();
    expect(text).toContain('process_cpu_user_seconds_total');
    expect(text).toContain('process_resident_memory_bytes');
    expect(text).toContain('nodejs_heap_size_used_bytes');
    // A second registry in the same process does not clash.
    expect(await createRegistry().metrics()).toContain('process_cpu_user_seconds_total');
  });

  it('can leave the default metrics out', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    expect(registry.getMetricsAsArray()).toHaveLength(0);
  });
});

describe('get-or-create', () => {
  it('returns the same metric to every component sharing a registry', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    const config = { name: 'berth_things_total', help: 'Things.', labelNames: ['controller'] as const };
    const a = getOrCreateCounter(registry, config);
    const b = getOrCreateCounter(registry, { ...config, labelNames: ['controller'] });
    expect(a).toBe(b);
    expect(a).toBeInstanceOf(Counter);
    a.inc({ controller: 'x' });
    b.inc({ controller: 'x' }, 2);
    expect(await registry.getSingleMetricAsString('berth_things_total')).toContain(
      'berth_things_total{controller="x"} 3',
    );

    const g = getOrCreateGauge(registry, { name: 'berth_level', help: 'Level.' });
    expect(getOrCreateGauge(registry, { name: 'berth_level', help: 'Level.' })).toBe(g);
    expect(g).toBeInstanceOf(Gauge);
    const h = getOrCreateHistogram(registry, { name: 'berth_seconds', help: 'S.', buckets: [1, 2] });
    expect(getOrCreateHistogram(registry, { name: 'berth_seconds', help: 'S.' })).toBe(h);
    expect(h).toBeInstanceOf(Histogram);
  });

  it('keeps registries apart', () => {
    const one = createRegistry({ defaultMetrics: false });
    const two = createRegistry({ defaultMetrics: false });
    const a = getOrCreateCounter(one, { name: 'berth_x_total', help: 'x' });
    const b = getOrCreateCounter(two, { name: 'berth_x_total', help: 'x' });
    expect(a).not.toBe(b);
  });

  it('refuses a name already used with another type or other labels', () => {
    const registry = createRegistry({ defaultMetrics: false });
    getOrCreateCounter(registry, { name: 'berth_y_total', help: 'y', labelNames: ['a', 'b'] });
    expect(() =>
      getOrCreateGauge(registry, { name: 'berth_y_total', help: 'y', labelNames: ['a', 'b'] }),
    ).toThrow(/different type/);
    expect(() =>
      getOrCreateCounter(registry, { name: 'berth_y_total', help: 'y', labelNames: ['a'] }),
    ).toThrow(/labels \[a,b\], not \[a\]/);
    // Label order does not matter.
    expect(() =>
      getOrCreateCounter(registry, { name: 'berth_y_total', help: 'y', labelNames: ['b', 'a'] }),
    ).not.toThrow();
  });
});

describe('exponentialBuckets', () => {
  it('matches prometheus.ExponentialBuckets', () => {
    expect(exponentialBuckets(1, 2, 4)).toEqual([1, 2, 4, 8]);
    expect(exponentialBuckets(0.005, 10, 3).map((b) => Number(b.toPrecision(12)))).toEqual([
      0.005, 0.05, 0.5,
    ]);
  });
});
