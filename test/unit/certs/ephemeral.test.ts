import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EPHEMERAL_VALIDITY_MS, EphemeralCertificateProvider } from '../../../certs/ephemeral.ts';
import { checkServingPair } from '../../../certs/pair.ts';
import { ManualClock } from '../../../src/kube/clock.ts';

describe('EphemeralCertificateProvider', () => {
  it('generates a valid pair in memory on start and a new one at 2/3 of its life', async () => {
    const clock = new ManualClock(Date.now());
    const provider = new EphemeralCertificateProvider({ dnsNames: ['localhost'], caName: 'test-ca', clock });
    expect(provider.current()).toBeUndefined();
    const changes: string[] = [];
    provider.onChange((pair) => changes.push(pair.cert));
    await provider.start();
    const first = provider.current();
    expect(first).toBeDefined();
    const checked = checkServingPair(first!.cert, first!.key, clock.now());
    expect(checked.ok && checked.value.dnsNames).toEqual(['localhost']);
    const leaf = new X509Certificate(first!.cert);
    expect(leaf.verify(new X509Certificate(first!.ca!).publicKey)).toBe(true);
    expect(provider.expiry()?.getTime()).toBeLessThanOrEqual(clock.now() + EPHEMERAL_VALIDITY_MS);
    // Nothing before the renewal time (2/3 of the validity, notBefore being backdated by a minute).
    await clock.advanceAsync((EPHEMERAL_VALIDITY_MS * 2) / 3 - 120_000);
    expect(provider.current()).toBe(first);
    await clock.advanceAsync(120_000);
    await provider.stop(); // waits for the renewal in flight
    expect(provider.current()?.cert).not.toBe(first!.cert);
    expect(changes).toHaveLength(2);
    expect(clock.pending()).toBe(0);
  });

  it('does nothing once stopped, and stops with the start signal', async () => {
    const clock = new ManualClock(Date.now());
    const aborted = new AbortController();
    aborted.abort();
    const never = new EphemeralCertificateProvider({ dnsNames: ['localhost'], caName: 'test-ca', clock });
    await never.start(aborted.signal);
    expect(never.current()).toBeUndefined();
    const signal = new AbortController();
    const provider = new EphemeralCertificateProvider({ dnsNames: ['localhost'], caName: 'test-ca', clock });
    await provider.start(signal.signal);
    expect(clock.pending()).toBe(1);
    signal.abort();
    expect(clock.pending()).toBe(0);
  });
});
