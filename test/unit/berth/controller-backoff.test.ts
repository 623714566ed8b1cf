// The BerthLease controller's error backoff is capped at 1 s (src/berth/controller.ts
// berthLeaseRateLimiter): a lease whose reconciles fail (Kubernetes API errors) is retried at least
// every second, so an activation that expired meanwhile is stopped within about a second of the API
// recovering rather than after a backoff grown to minutes (found by the soak: a managed workload kept
// running past its deadline, next to the other cluster's, until the backoff timer fired).
import { describe, expect, it } from 'vitest';
import { BerthLeaseController } from '../../../src/berth/controller.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { FakeLeaseStore, ScriptedLeaseClient } from './fakes.ts';

describe('BerthLease controller error backoff', () => {
  it('grows from 5 ms but never beyond 1 s, however many failures', async () => {
    const clock = new ManualClock();
    const controller = new BerthLeaseController({
      transport: { request: () => Promise.reject(new Error('no API in this test')) },
      api: new FakeLeaseStore(),
      leaseClient: new ScriptedLeaseClient(),
      clusterIdentity: 'cluster-east',
      operatorNamespace: 'berth-system',
      clock,
    });
    const queue = controller.controller.queue;
    const delays: number[] = [];
    for (let failure = 1; failure <= 25; failure++) {
      queue.addRateLimited('team-a/l');
      const before = clock.now();
      while (queue.len() === 0 && clock.now() - before <= 2_000) clock.advance(5);
      delays.push(clock.now() - before);
      expect(queue.len()).toBe(1);
      expect(await queue.get()).toBe('team-a/l');
      queue.done('team-a/l');
    }
    expect(delays.slice(0, 4)).toEqual([5, 10, 20, 40]);
    expect(Math.max(...delays)).toBe(1_000);
    expect(delays.slice(-5)).toEqual([1_000, 1_000, 1_000, 1_000, 1_000]);
    queue.shutDown();
  });
});
