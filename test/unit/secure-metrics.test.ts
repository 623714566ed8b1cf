// The `--metrics-secure` listener's certificate expiry gauge, on a ManualClock: the in-memory
// certificate's remaining life from the moment the provider has one, apart from the webhook's gauge.
import { describe, expect, it } from 'vitest';
import { EPHEMERAL_VALIDITY_MS } from '../../certs/ephemeral.ts';
import { EXPIRY_METRIC, METRICS_EXPIRY_METRIC, registerExpirySource } from '../../certs/metrics.ts';
import { ManualClock } from '../../src/kube/clock.ts';
import type { RunnableContext } from '../../src/kube/manager.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createRegistry } from '../../src/observability/metrics.ts';
import { secureMetrics } from '../../src/secure-metrics.ts';

const logger = createLogger({ level: 'silent' });
const ctx: RunnableContext = {
  logger,
  fail: (err) => {
    throw err;
  },
};

describe('berth_metrics_certificate_expiry_seconds', () => {
  it("reports the secure metrics certificate's remaining life, 0 before it exists, apart from the webhook's", async () => {
    const clock = new ManualClock(Date.now());
    const registry = createRegistry({ defaultMetrics: false });
    registerExpirySource(registry, () => 42);
    const metrics = secureMetrics({
      certDir: '',
      transport: { request: () => Promise.reject(new Error('not used')) },
      logger,
      clock,
      registry,
    });
    const value = async (name: string): Promise<number | undefined> =>
      (await registry.getSingleMetric(name)?.get())?.values[0]?.value;
    expect(await value(METRICS_EXPIRY_METRIC)).toBe(0);
    const running = new AbortController();
    await metrics.runnable.start(running.signal, ctx);
    const left = await value(METRICS_EXPIRY_METRIC);
    expect(left).toBeGreaterThan(EPHEMERAL_VALIDITY_MS / 1000 - 120);
    expect(left).toBeLessThanOrEqual(EPHEMERAL_VALIDITY_MS / 1000);
    await clock.advanceAsync(3_600_000);
    expect(await value(METRICS_EXPIRY_METRIC)).toBeCloseTo((left ?? 0) - 3_600, 3);
    // The webhook's gauge is its own.
    expect(await value(EXPIRY_METRIC)).toBe(42);
    running.abort();
    await metrics.runnable.stop?.();
  });
});
