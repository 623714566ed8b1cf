// The small pieces around the providers: the TLS hot-swap hook, the holder's listener and
// waiter semantics, the expiry gauge, and the serial runner.
import type { SecureContextOptions } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { CertificateHolder } from '../../../certs/holder.ts';
import { EXPIRY_METRIC, registerExpirySource } from '../../../certs/metrics.ts';
import type { CertificateListener } from '../../../certs/provider.ts';
import { SerialRunner } from '../../../certs/serial.ts';
import { attachToTlsServer } from '../../../certs/tls-server.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';

describe('attachToTlsServer', () => {
  it('re-applies the server options with each new pair, and detaches', () => {
    const holder = new CertificateHolder();
    const applied: SecureContextOptions[] = [];
    const detach = attachToTlsServer(
      holder,
      { setSecureContext: (o: SecureContextOptions) => applied.push(o) },
      {
        minVersion: 'TLSv1.2',
      },
    );
    holder.set({ cert: 'C1', key: 'K1' }, new Date(1));
    expect(applied).toEqual([{ minVersion: 'TLSv1.2', cert: 'C1', key: 'K1' }]);
    detach();
    holder.set({ cert: 'C2', key: 'K2' }, new Date(1));
    expect(applied).toHaveLength(1);
  });

  it('keeps the old context when the new one cannot be loaded', () => {
    const holder = new CertificateHolder();
    const lines: string[] = [];
    const logger = createLogger({ destination: { write: (l: string) => void lines.push(l) } });
    attachToTlsServer(
      holder,
      {
        setSecureContext: () => {
          throw Object.assign(new Error('bad'), { code: 'ERR_OSSL_PEM_NO_START_LINE' });
        },
      },
      {},
      logger,
    );
    expect(() => holder.set({ cert: 'C', key: 'K' }, new Date(1))).not.toThrow();
    expect(lines.join('')).toContain('ERR_OSSL_PEM_NO_START_LINE');
  });
});

describe('CertificateHolder', () => {
  it('notifies only on a change, after current() has it, and survives a throwing listener', () => {
    const holder = new CertificateHolder(createLogger({ level: 'silent' }));
    const seen: string[] = [];
    holder.onChange(() => {
      throw new Error('listener bug');
    });
    const listener: CertificateListener = (p) => seen.push(`${p.cert}:${holder.current()?.cert}`);
    const off = holder.onChange(listener);
    expect(holder.set({ cert: 'C', key: 'K' }, new Date(5))).toBe(true);
    expect(holder.set({ cert: 'C', key: 'K' }, new Date(6))).toBe(false);
    expect(holder.expiry()).toEqual(new Date(6));
    expect(holder.set({ cert: 'C', key: 'K', ca: 'A' }, new Date(6))).toBe(true);
    off();
    holder.set({ cert: 'D', key: 'K' }, new Date(6));
    expect(seen).toEqual(['C:C', 'C:C']);
  });

  it('wakes waiters on the first pair and honours abort', async () => {
    const holder = new CertificateHolder();
    const ac = new AbortController();
    const aborted = holder.waitFor(ac.signal);
    const waiting = holder.waitFor();
    ac.abort(new Error('stop'));
    await expect(aborted).rejects.toThrow('stop');
    holder.set({ cert: 'C', key: 'K' }, new Date(1));
    await expect(waiting).resolves.toBeUndefined();
    await expect(holder.waitFor(AbortSignal.abort())).resolves.toBeUndefined();
  });
});

describe('expiry gauge', () => {
  it('is computed at scrape time, reports the soonest expiry, and 0 with no certificate', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    let a: number | undefined;
    const offA = registerExpirySource(registry, () => a);
    const offB = registerExpirySource(registry, () => 500);
    const value = async (): Promise<number> =>
      (await registry.getSingleMetric(EXPIRY_METRIC)!.get()).values[0]!.value;
    expect(await value()).toBe(500);
    a = 100;
    expect(await value()).toBe(100);
    offA();
    offB();
    expect(await value()).toBe(0);
  });
});

describe('SerialRunner', () => {
  it('runs one job at a time and coalesces requests made while one runs', async () => {
    let runs = 0;
    let active = 0;
    let release: (() => void) | undefined;
    const runner = new SerialRunner(async () => {
      runs++;
      active++;
      expect(active).toBe(1);
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      active--;
    });
    const first = runner.run();
    await new Promise((r) => setImmediate(r));
    const second = runner.run();
    const third = runner.run();
    expect(second).toBe(third);
    release!();
    await first;
    await new Promise((r) => setImmediate(r));
    release!();
    await second;
    expect(runs).toBe(2);
  });
});
