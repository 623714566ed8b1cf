import { ApiException, type V1Lease } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import { LeaderElector, type LeaderElectorOptions, type LeaseClient } from '../../../src/kube/leader.ts';
import { leaseSpecFromRecord, releasedRecord } from '../../../src/kube/leader-decision.ts';
import { formatMicroTime } from '../../../src/kube/microtime.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { MICROTIME, record, T0 } from './leader-fixtures.ts';

// ---------------------------------------------------------------------------------------------------
// The elector loop, driven by a ManualClock against an in-memory Lease store with resourceVersions.

type Mode = 'ok' | 'fail' | 'hang';

class FakeLeaseStore {
  lease: V1Lease | undefined;
  #rv = 0;
  writes = 0;

  /** `latency` (per operation, on `clock`) is how long each request takes before it lands and answers. */
  client(
    mode: () => Mode,
    latency?: { clock: ManualClock; ms: Partial<Record<'get' | 'create' | 'replace', number>> },
  ): LeaseClient {
    const gate = async <T>(
      signal: AbortSignal,
      fn: () => T,
      op: 'get' | 'create' | 'replace',
    ): Promise<T> => {
      await Promise.resolve();
      const delay = latency?.ms[op] ?? 0;
      if (latency !== undefined && delay > 0) await latency.clock.sleep(delay, signal);
      const m = mode();
      if (m === 'fail') throw new ApiException(500, 'boom', '{"message":"injected"}', {});
      if (m === 'hang') {
        return new Promise<T>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      }
      return fn();
    };
    return {
      get: (_ns, _name, signal) =>
        gate(signal, () => (this.lease ? structuredClone(this.lease) : undefined), 'get'),
      create: (_ns, body, signal) =>
        gate(
          signal,
          () => {
            if (this.lease) throw new ApiException(409, 'exists', '{"reason":"AlreadyExists"}', {});
            return this.#store(body);
          },
          'create',
        ),
      replace: (_ns, _name, body, signal) =>
        gate(
          signal,
          () => {
            if (!this.lease) throw new ApiException(404, 'missing', '{}', {});
            if (body.metadata?.resourceVersion !== this.lease.metadata?.resourceVersion) {
              throw new ApiException(409, 'conflict', '{"reason":"Conflict"}', {});
            }
            return this.#store(body);
          },
          'replace',
        ),
    };
  }

  #store(body: V1Lease): V1Lease {
    const wire = JSON.parse(JSON.stringify(body)) as V1Lease;
    for (const t of [wire.spec?.acquireTime, wire.spec?.renewTime]) {
      if (t !== undefined && !MICROTIME.test(String(t))) throw new ApiException(400, 'bad time', '{}', {});
    }
    wire.metadata = { ...wire.metadata, resourceVersion: String(++this.#rv) };
    this.lease = wire;
    this.writes++;
    return structuredClone(wire);
  }

  get holder(): string | undefined {
    return this.lease?.spec?.holderIdentity;
  }
}

interface Harness {
  elector: LeaderElector;
  stop: AbortController;
  done: Promise<unknown>;
  events: string[];
  setMode(m: Mode): void;
}

const running: Harness[] = [];
afterEach(async () => {
  for (const h of running.splice(0)) h.stop.abort();
});

function startElector(
  store: FakeLeaseStore,
  clock: ManualClock,
  identity: string,
  over: Partial<LeaderElectorOptions> = {},
): Harness {
  let mode: Mode = 'ok';
  const events: string[] = [];
  const elector = new LeaderElector({
    client: store.client(() => mode),
    namespace: 'ns',
    name: 'lock',
    identity,
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000,
    releaseOnCancel: false,
    clock,
    random: () => 0,
    ...over,
  });
  const stop = new AbortController();
  const done = elector.run(stop.signal, {
    onStartedLeading: () => events.push('started'),
    onStoppedLeading: (info) => events.push(info.lost ? 'lost' : info.released ? 'released' : 'stopped'),
    onNewLeader: (id) => events.push(`leader:${id}`),
  });
  const h = { elector, stop, done, events, setMode: (m: Mode) => (mode = m) };
  running.push(h);
  return h;
}

describe('LeaderElector', () => {
  it('creates the Lease, leads, and renews every retry period', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    const registry = createRegistry({ defaultMetrics: false });
    const a = startElector(store, clock, 'a', { registry });
    await clock.advanceAsync(0);
    expect(a.elector.isLeader()).toBe(true);
    expect(a.events).toEqual(['leader:a', 'started']);
    expect(store.lease?.spec).toMatchObject({
      holderIdentity: 'a',
      leaseDurationSeconds: 15,
      leaseTransitions: 0,
    });
    expect(store.lease?.spec?.acquireTime).toBe(formatMicroTime(T0));
    expect((await registry.getSingleMetric('leader_election_master_status')?.get())?.values).toEqual([
      { labels: { name: 'lock' }, value: 1 },
    ]);

    await clock.advanceAsync(2_000);
    expect(String(store.lease?.spec?.renewTime)).toBe(formatMicroTime(T0 + 2_000));
    expect(String(store.lease?.spec?.acquireTime)).toBe(formatMicroTime(T0));
    await clock.advanceAsync(2_000);
    expect(String(store.lease?.spec?.renewTime)).toBe(formatMicroTime(T0 + 4_000));
    expect(store.writes).toBe(3);
  });

  it('a candidate takes over a dead leader exactly when its observation expires, not before', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    const a = startElector(store, clock, 'a');
    await clock.advanceAsync(0);
    const b = startElector(store, clock, 'b');
    await clock.advanceAsync(0);
    expect(b.elector.isLeader()).toBe(false);
    expect(b.elector.getLeader()).toBe('a');

    // `a` dies without releasing (a crash): its last renewal is at T0 + 2 s.
    await clock.advanceAsync(2_000);
    a.stop.abort();
    await a.done;
    const lastRenewSeenAt = clock.now(); // b's jitter-free polls see each change within the same instant
    expect(a.elector.isLeader()).toBe(false);
    await clock.advanceAsync(14_990);
    expect(b.elector.isLeader()).toBe(false);
    expect(store.holder).toBe('a');
    await clock.advanceAsync(20);
    expect(b.elector.isLeader()).toBe(true);
    expect(clock.now() - lastRenewSeenAt).toBeLessThanOrEqual(15_010);
    expect(store.lease?.spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    expect(b.events).toEqual(['leader:a', 'leader:b', 'started']);
  });

  it('steps down once it cannot renew within the renew deadline, and not earlier', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    const registry = createRegistry({ defaultMetrics: false });
    const a = startElector(store, clock, 'a', { registry });
    await clock.advanceAsync(0);
    a.setMode('fail');
    // Last successful renewal was sent at T0; the deadline is T0 + 10 s.
    await clock.advanceAsync(9_999);
    expect(a.elector.isLeader()).toBe(true);
    await clock.advanceAsync(1);
    expect(a.elector.isLeader()).toBe(false);
    expect(await a.done).toEqual({ led: true, lost: true, released: false });
    expect(a.events).toEqual(['leader:a', 'started', 'lost']);
    expect((await registry.getSingleMetric('leader_election_master_status')?.get())?.values[0]?.value).toBe(
      0,
    );
  });

  // The integration test's timings: 2 s lease, 1 s renew deadline, 250 ms retry period.
  const fast = { leaseDurationMs: 2_000, renewDeadlineMs: 1_000, retryPeriodMs: 250 };

  it('counts the renew deadline from when the winning write was sent, not from the read before it', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    // A slow read (600 ms) before the create: the create is sent at T0 + 600 ms and answers at T0 + 700.
    const client = store.client(() => 'ok', { clock, ms: { get: 600, create: 100, replace: 100 } });
    const a = startElector(store, clock, 'a', { ...fast, client });
    await clock.advanceAsync(700);
    expect(a.elector.isLeader()).toBe(true);
    const writes = store.writes;
    // Counted from T0 the first renewal would have had 50 ms left for a 100 ms request: lost at once.
    for (let i = 0; i < 40; i++) await clock.advanceAsync(50);
    expect(a.elector.isLeader()).toBe(true);
    expect(store.writes).toBeGreaterThan(writes + 4);
    expect(a.events).toEqual(['leader:a', 'started']);
  });

  it('sends each renewal a retry period after the previous one was sent, so slow answers do not cost leadership', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    // Every renewal takes 450 ms: sent every max(250, 450) ms each has 1000 - 450 ms left; waiting 250 ms
    // after each answer would leave it 1000 - 700 = 300 ms, too little.
    const client = store.client(() => 'ok', { clock, ms: { replace: 450 } });
    const a = startElector(store, clock, 'a', { ...fast, client });
    await clock.advanceAsync(0);
    expect(a.elector.isLeader()).toBe(true);
    for (let i = 0; i < 100; i++) await clock.advanceAsync(50);
    expect(a.elector.isLeader()).toBe(true);
    expect(a.events).toEqual(['leader:a', 'started']);
    expect(store.writes).toBeGreaterThanOrEqual(10); // 1 create + a renewal every 450 ms for 5 s
  });

  it('renews every retry period counted from the previous send when answers are quick', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    const client = store.client(() => 'ok', { clock, ms: { replace: 100 } });
    startElector(store, clock, 'a', { ...fast, client });
    await clock.advanceAsync(0);
    const sent: string[] = [];
    for (let i = 0; i < 20; i++) {
      await clock.advanceAsync(50);
      const renewTime = String(store.lease?.spec?.renewTime);
      if (sent.at(-1) !== renewTime) sent.push(renewTime);
    }
    // renewTime is stamped when the renewal is sent: T0, +250, +500, ... (not +350, +700, ...).
    expect(sent.slice(0, 4)).toEqual([0, 250, 500, 750].map((ms) => formatMicroTime(T0 + ms)));
  });

  it('cuts a hanging renewal at the renew deadline', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    const a = startElector(store, clock, 'a');
    await clock.advanceAsync(0);
    await clock.advanceAsync(2_000); // renewed, sent at T0 + 2 s
    a.setMode('hang');
    await clock.advanceAsync(9_999);
    expect(a.elector.isLeader()).toBe(true);
    await clock.advanceAsync(2);
    expect(a.elector.isLeader()).toBe(false);
    expect((await a.done) as object).toMatchObject({ lost: true });
  });

  it('steps down at once when the Lease shows another holder', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    const a = startElector(store, clock, 'a');
    await clock.advanceAsync(0);
    // Someone force-writes the Lease (e.g. kubectl edit).
    store.lease = {
      ...store.lease,
      metadata: { ...store.lease?.metadata, resourceVersion: '999' },
      spec: leaseSpecFromRecord(record({ holderIdentity: 'intruder' })),
    };
    await clock.advanceAsync(2_000);
    expect(a.elector.isLeader()).toBe(false);
    expect(a.events).toContain('lost');
    expect(store.holder).toBe('intruder');
  });

  it('releases on cancel when configured, and a waiting candidate takes over at its next poll', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    const a = startElector(store, clock, 'a', { releaseOnCancel: true });
    await clock.advanceAsync(0);
    const b = startElector(store, clock, 'b');
    await clock.advanceAsync(0);
    a.stop.abort();
    expect(await a.done).toEqual({ led: true, lost: false, released: true });
    expect(a.events).toEqual(['leader:a', 'started', 'released']);
    expect(store.lease?.spec).toMatchObject({
      holderIdentity: '',
      leaseDurationSeconds: 1,
      leaseTransitions: 0,
    });
    await clock.advanceAsync(2_000);
    expect(b.elector.isLeader()).toBe(true);
    expect(store.lease?.spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
  });

  it('leaves the Lease alone on cancel when release is off', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    const a = startElector(store, clock, 'a');
    await clock.advanceAsync(0);
    a.stop.abort();
    expect(await a.done).toEqual({ led: true, lost: false, released: false });
    expect(store.holder).toBe('a');
  });

  it('only one of two racing candidates wins (409 for the other)', async () => {
    const clock = new ManualClock(T0);
    const store = new FakeLeaseStore();
    store.lease = {
      metadata: { name: 'lock', namespace: 'ns', resourceVersion: '0' },
      spec: leaseSpecFromRecord(releasedRecord(record(), T0)),
    };
    const a = startElector(store, clock, 'a');
    const b = startElector(store, clock, 'b');
    await clock.advanceAsync(0);
    expect([a.elector.isLeader(), b.elector.isLeader()].filter(Boolean)).toHaveLength(1);
    await clock.advanceAsync(30_000);
    expect([a.elector.isLeader(), b.elector.isLeader()].filter(Boolean)).toHaveLength(1);
    expect(store.lease?.spec?.leaseTransitions).toBe(4);
  });

  it('rejects invalid timings', () => {
    const store = new FakeLeaseStore();
    expect(
      () =>
        new LeaderElector({
          client: store.client(() => 'ok'),
          namespace: 'ns',
          name: 'lock',
          leaseDurationMs: 5_000,
          renewDeadlineMs: 5_000,
          retryPeriodMs: 1_000,
          releaseOnCancel: false,
        }),
    ).toThrow(/lease duration must be greater/);
  });
});
