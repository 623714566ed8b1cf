// The drain of stopAndRelease (docs/behaviour.md §2.4) and the managed controllers' decisions (§2.7), pure and against
// an in-memory API; the per-lease lock.
import { describe, expect, it } from 'vitest';
import { MANAGED_UID } from '../../../src/berth/api.ts';
import {
  drainJobs,
  drainPods,
  isLeasePod,
  planPodDrain,
  podStopGraceSeconds,
} from '../../../src/berth/drain.ts';
import { KeyedLock } from '../../../src/berth/keyed-lock.ts';
import { decideJob } from '../../../src/berth/managed-jobs.ts';
import { decidePod } from '../../../src/berth/managed-pods.ts';
import { closingTransition } from '../../../src/berth/managed-workloads.ts';
import type { KubeObj } from '../../../src/berth/workload-io.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { LEASE_UID, managedLease, pod, T0 } from './managed-fixtures.ts';
import { conflictError, FakeWorkloadApi } from './workload-fakes.ts';

const session = (lease = managedLease({ phase: 'Stopping' })) => ({
  lease,
  signal: new AbortController().signal,
  log: createLogger({ level: 'silent' }),
  now: () => T0,
  stopLeadMs: 5_000,
  stamp: () => ({ now: T0, generation: 1 }),
  writeStatus: async () => lease,
});

describe('drainPods', () => {
  it('counts registered Pods and Pods annotated with the lease UID, whatever their labels', () => {
    const lease = managedLease({ pods: [{ name: 'registered', uid: 'uid-registered' }] });
    const unlabelled = pod('registered', { annotations: {} });
    unlabelled.metadata.labels = {};
    expect(isLeasePod(lease, unlabelled)).toBe(true);
    expect(isLeasePod(lease, pod('annotated'))).toBe(true);
    expect(isLeasePod(lease, pod('foreign', { annotations: { [MANAGED_UID]: 'other' } }))).toBe(false);
    // A Pod reusing a registered name with another UID is not the registered one.
    const reused = pod('registered', { annotations: {} });
    reused.metadata.uid = 'new';
    expect(isLeasePod(lease, reused)).toBe(false);
  });

  it('deletes every Pod of the lease not yet deleting (gated and Pending too); done when all are terminal or gone', () => {
    const lease = managedLease();
    const plan = planPodDrain(
      lease,
      [
        pod('gated'),
        pod('running', { gated: false, phase: 'Running' }),
        pod('terminating', { gated: false, phase: 'Running', deleting: true }),
        pod('finished', { gated: false, phase: 'Succeeded' }),
        pod('foreign', { annotations: {} }),
      ],
      T0,
    );
    expect(plan.delete.map((d) => d.pod.metadata.name)).toEqual(['gated', 'running', 'finished']);
    expect(plan.remaining.map((p) => p.metadata.name)).toEqual(['gated', 'running', 'terminating']);
  });

  it('deletes with the UID precondition and reports progress', async () => {
    const api = new FakeWorkloadApi();
    api.put('Pod', pod('a', { gated: false, phase: 'Running' }));
    api.put('Pod', pod('b'));
    const first = await drainPods(session(), api);
    expect(first).toEqual({ done: false, deleted: 2, remaining: 2 });
    expect(api.calls).toEqual(['list Pod', 'delete Pod/a', 'delete Pod/b']);
    // The deadline is 30 s ahead: each grace ends 1 s before it (the Pods' own 30 s would not).
    expect(api.graces.map((g) => g.gracePeriodSeconds)).toEqual([29, 29]);
    expect(await drainPods(session(), api)).toEqual({ done: true, deleted: 0, remaining: 0 });
  });
});

describe('the bounded Pod stop', () => {
  const DEADLINE = T0 + 30_000;

  it('ends the grace 1 s before the deadline, keeps a shorter own grace, never goes below 1 s', () => {
    expect(podStopGraceSeconds(undefined, DEADLINE, T0)).toBe(29);
    expect(podStopGraceSeconds(10, DEADLINE, T0)).toBe(10);
    expect(podStopGraceSeconds(60, DEADLINE, DEADLINE - 5_000)).toBe(4);
    // Truncated: 4.5 s left less the margin gives 3 s, not 4.
    expect(podStopGraceSeconds(60, DEADLINE, DEADLINE - 4_500)).toBe(3);
    expect(podStopGraceSeconds(60, DEADLINE, DEADLINE - 1_500)).toBe(1);
    expect(podStopGraceSeconds(60, DEADLINE, DEADLINE + 10_000)).toBe(1);
    // 0 would remove the object before the kubelet stopped anything.
    expect(podStopGraceSeconds(0, DEADLINE, T0)).toBe(1);
    // No recorded deadline: the Pod's own grace.
    expect(podStopGraceSeconds(60, undefined, T0)).toBeUndefined();
  });

  const terminating = (graceSeconds: number, startedAt: number): KubeObj => {
    const p = pod('t', { gated: false, phase: 'Running' });
    p.metadata.deletionTimestamp = new Date(startedAt + graceSeconds * 1000).toISOString();
    p.metadata.deletionGracePeriodSeconds = graceSeconds;
    return p;
  };

  it('deletes a Pod again whose controller deleted it with a grace that ends past the bound', () => {
    const lease = managedLease({ phase: 'Stopping', deadline: new Date(DEADLINE).toISOString() });
    const now = DEADLINE - 5_000;
    const own = pod('own', { gated: false, phase: 'Running' });
    own.spec = { ...own.spec, terminationGracePeriodSeconds: 120 };
    const plan = planPodDrain(lease, [own, terminating(30, now - 100)], now);
    expect(plan.delete.map((d) => [d.pod.metadata.name, d.graceSeconds])).toEqual([
      ['own', 4],
      ['t', 4],
    ]);
    // Its grace already ends before the bound, or cannot be shortened: left alone.
    expect(planPodDrain(lease, [terminating(3, now)], now).delete).toEqual([]);
    expect(planPodDrain(lease, [terminating(1, now)], DEADLINE).delete).toEqual([]);
  });

  it('sends the bounded grace with the DELETE of a draining Pod', async () => {
    const api = new FakeWorkloadApi();
    const lease = managedLease({ phase: 'Stopping', deadline: new Date(DEADLINE).toISOString() });
    api.put('Pod', pod('a', { gated: false, phase: 'Running' }));
    await drainPods({ ...session(lease), now: () => DEADLINE - 3_000 }, api);
    expect(api.graces).toEqual([{ name: 'a', gracePeriodSeconds: 2 }]);
  });
});

describe('drainJobs', () => {
  const job = (name: string, suspend: boolean | undefined): KubeObj => ({
    metadata: {
      name,
      uid: `uid-${name}`,
      labels: { [MANAGED_UID]: LEASE_UID },
      annotations: { [MANAGED_UID]: LEASE_UID },
    },
    spec: suspend === undefined ? {} : { suspend },
  });

  it('suspends, then deletes every managed Job; done once none is listed', async () => {
    const api = new FakeWorkloadApi();
    api.put('Job', job('j1', false));
    api.put('Job', job('j2', true));
    api.failures.set('patch Job/j1', [conflictError()]);
    expect(await drainJobs(session(), api)).toEqual({ done: true, deleted: 2, remaining: 0 });
    expect(api.calls.filter((c) => !c.startsWith('list') && !c.startsWith('get'))).toEqual([
      'patch Job/j1',
      'patch Job/j1',
      'delete Job/j1',
      'delete Job/j2',
    ]);
  });
});

describe('decidePod and decideJob (managed-pods, managed-jobs)', () => {
  const active = managedLease();
  it('removes objects of a lease that is gone, replaced, deleting or stopping', () => {
    expect(decidePod(pod('a'), undefined, T0, 0)).toEqual({
      kind: 'delete',
      reason: 'lease-gone',
      nudge: false,
    });
    const replaced = managedLease();
    replaced.metadata.uid = 'new-uid';
    expect(decidePod(pod('a'), replaced, T0, 0)).toMatchObject({ reason: 'lease-replaced' });
    expect(decidePod(pod('a'), managedLease({}, { deleting: true }), T0, 0)).toMatchObject({
      reason: 'lease-deleting',
      nudge: true,
    });
    expect(decidePod(pod('a'), managedLease({ phase: 'Stopping' }), T0, 0)).toMatchObject({
      reason: 'lease-stopping',
      nudge: true,
    });
    expect(decideJob(pod('a'), managedLease({ phase: 'Stopping' }))).toMatchObject({
      kind: 'remove',
      reason: 'lease-stopping',
    });
    expect(decideJob(pod('a'), active)).toEqual({ kind: 'ignore' });
  });

  it('leaves Pods of an inactive lease gated and hands gated Pods of an active one to permitting', () => {
    expect(decidePod(pod('a'), managedLease({ phase: '' }), T0, 0)).toEqual({ kind: 'wait' });
    expect(decidePod(pod('a'), active, T0 + 31_000, 0)).toEqual({ kind: 'wait' });
    expect(decidePod(pod('a'), active, T0, 0)).toEqual({ kind: 'permit' });
    // The stop lead: 30 s before the deadline, a lead of 30 s has ended the activation.
    expect(decidePod(pod('a'), active, T0, 29_999)).toEqual({ kind: 'permit' });
    expect(decidePod(pod('a'), active, T0, 30_000)).toEqual({ kind: 'wait' });
    const running = managedLease({ pods: [{ name: 'a', uid: 'uid-a' }] });
    expect(decidePod(pod('a', { gated: false }), running, T0, 0)).toEqual({ kind: 'ignore' });
    expect(decidePod(pod('a', { annotations: {} }), active, T0, 0)).toEqual({ kind: 'ignore' });
  });

  it('re-examines a lease’s objects when it starts closing, is deleted or replaced — not on heartbeats', () => {
    const a = managedLease();
    const later = managedLease({ deadline: '2026-09-07T09:01:00Z' });
    expect(closingTransition(a, later)).toBe(false);
    expect(closingTransition(a, managedLease({ phase: 'Stopping' }))).toBe(true);
    expect(closingTransition(managedLease({ phase: 'Stopping' }), managedLease({ phase: 'Stopping' }))).toBe(
      false,
    );
    expect(closingTransition(a, managedLease({}, { deleting: true }))).toBe(true);
    expect(closingTransition(a, undefined)).toBe(true);
    expect(closingTransition(undefined, a)).toBe(true);
    const replaced = managedLease();
    replaced.metadata.uid = 'other';
    expect(closingTransition(a, replaced)).toBe(true);
  });
});

describe('KeyedLock', () => {
  it('serializes work per key, in arrival order, and lets other keys run', async () => {
    const lock = new KeyedLock();
    const order: string[] = [];
    let releaseFirst!: () => void;
    const first = lock.run('a', async () => {
      order.push('a1 start');
      await new Promise<void>((resolve) => {
        releaseFirst = resolve;
      });
      order.push('a1 end');
    });
    const second = lock.run('a', async () => {
      order.push('a2');
    });
    await lock.run('b', async () => {
      order.push('b');
    });
    releaseFirst();
    await Promise.all([first, second]);
    expect(order).toEqual(['a1 start', 'b', 'a1 end', 'a2']);
    expect(lock.size).toBe(0);
  });

  it('a waiter whose signal aborts leaves the line; the next one still waits for the holder', async () => {
    const lock = new KeyedLock();
    let release!: () => void;
    const holder = lock.run('k', () => new Promise<void>((resolve) => (release = resolve)));
    const aborted = new AbortController();
    const gaveUp = lock.run('k', async () => 'never', aborted.signal);
    let third = false;
    const next = lock.run('k', async () => {
      third = true;
    });
    aborted.abort(new Error('timeout'));
    await expect(gaveUp).rejects.toThrow('timeout');
    await Promise.resolve();
    expect(third).toBe(false);
    release();
    await Promise.all([holder, next]);
    expect(third).toBe(true);
  });
});
