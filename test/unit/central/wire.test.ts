import { describe, expect, it } from 'vitest';
import { matchRoute, requestIdFor } from '../../../src/central/http.ts';
import { CachedProbe } from '../../../src/central/readiness.ts';
import { formatGoTime, leaseResponseBody } from '../../../src/central/wire.ts';
import { ManualClock } from '../../../src/kube/clock.ts';

describe('wire format', () => {
  it('formats times like Go (RFC 3339, trailing fraction zeros trimmed, zero time for absent)', () => {
    expect(formatGoTime(Date.UTC(2026, 8, 7, 10, 0, 30))).toBe('2026-09-07T10:00:30Z');
    expect(formatGoTime(Date.UTC(2026, 8, 7, 10, 0, 30, 120))).toBe('2026-09-07T10:00:30.12Z');
    expect(formatGoTime(Date.UTC(2026, 8, 7, 10, 0, 30, 7))).toBe('2026-09-07T10:00:30.007Z');
    expect(formatGoTime(undefined)).toBe('0001-01-01T00:00:00Z');
  });

  it('omits empty holder and zero token, never the times, in field order', () => {
    expect(
      JSON.stringify(
        leaseResponseBody({
          acquired: true,
          holder: 'cluster-east',
          fencingToken: 7,
          expiresAt: Date.UTC(2026, 8, 7, 10, 0, 30),
          acquiredAt: Date.UTC(2026, 8, 7, 9),
        }),
      ),
    ).toBe(
      '{"acquired":true,"holder":"cluster-east","fencingToken":7,"expiresAt":"2026-09-07T10:00:30Z","acquiredAt":"2026-09-07T09:00:00Z"}',
    );
    expect(
      JSON.stringify(
        leaseResponseBody({
          acquired: false,
          holder: '',
          fencingToken: 0,
          expiresAt: undefined,
          acquiredAt: undefined,
        }),
      ),
    ).toBe('{"acquired":false,"expiresAt":"0001-01-01T00:00:00Z","acquiredAt":"0001-01-01T00:00:00Z"}');
  });
});

describe('routing', () => {
  it('matches the lease routes on one segment each, unescaped after matching', () => {
    expect(matchRoute('/v1alpha1/namespaces/pipeline/leases/ingest/acquire')).toEqual({
      route: 'acquire',
      namespace: 'pipeline',
      name: 'ingest',
    });
    expect(matchRoute('/v1alpha1/namespaces/a%2Fb/leases/x/release?x=1')).toEqual({
      route: 'release',
      namespace: 'a/b',
      name: 'x',
    });
    expect(matchRoute('/v1alpha1/namespaces/a/b/leases/x/renew')).toEqual({
      route: 'unmatched',
      status: 404,
    });
    expect(matchRoute('/v1alpha1/namespaces//leases/x/renew')).toEqual({ route: 'unmatched', status: 404 });
    expect(matchRoute('/v1alpha1/namespaces/a/leases/x/steal')).toEqual({ route: 'unmatched', status: 404 });
    expect(matchRoute('/v1alpha1/namespaces/%zz/leases/x/renew')).toEqual({
      route: 'unmatched',
      status: 400,
    });
    expect(matchRoute('/healthz')).toEqual({ route: 'healthz' });
    expect(matchRoute('/readyz?verbose')).toEqual({ route: 'readyz' });
  });

  it('takes the request id from a valid traceparent, else generates one', () => {
    expect(requestIdFor('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toBe(
      '4bf92f3577b34da6a3ce929d0e0e4736',
    );
    expect(requestIdFor('00-00000000000000000000000000000000-00f067aa0ba902b7-01')).toMatch(/^[0-9a-f]{32}$/);
    expect(requestIdFor('00-00000000000000000000000000000000-00f067aa0ba902b7-01')).not.toBe(
      '00000000000000000000000000000000',
    );
    const a = requestIdFor(undefined);
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(requestIdFor('garbage')).not.toBe(a);
  });
});

describe('CachedProbe', () => {
  it('probes once for a storm, caches for the TTL, then probes again', async () => {
    const clock = new ManualClock();
    let probes = 0;
    let healthy = true;
    const gate = Promise.withResolvers<void>();
    const probe = new CachedProbe({
      clock,
      probe: async () => {
        probes++;
        if (probes === 1) await gate.promise;
        if (!healthy) throw new Error('down');
      },
    });
    const storm = Array.from({ length: 50 }, () => probe.check());
    gate.resolve();
    expect(await Promise.all(storm)).toEqual(Array(50).fill(true));
    expect(probes).toBe(1);
    healthy = false;
    clock.advance(999);
    expect(await probe.check()).toBe(true);
    expect(probes).toBe(1);
    clock.advance(1);
    expect(await probe.check()).toBe(false);
    expect(probes).toBe(2);
    expect(await probe.check()).toBe(false);
    expect(probes).toBe(2);
  });

  it('fails a probe that hangs past its timeout', async () => {
    const clock = new ManualClock();
    let aborted = false;
    const probe = new CachedProbe({
      clock,
      timeoutMs: 2_000,
      probe: (signal) =>
        new Promise<void>(() => {
          signal.addEventListener('abort', () => {
            aborted = true;
          });
        }),
    });
    const result = probe.check();
    await clock.advanceAsync(2_000);
    expect(await result).toBe(false);
    expect(aborted).toBe(true);
  });
});
