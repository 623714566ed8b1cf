// status.ts: meta.SetStatusCondition semantics (TestSetConditionStampsObservedGeneration) and the
// status written in each outcome, with the exact reasons and messages of docs/behaviour.md §2.5.
import { describe, expect, it } from 'vitest';
import type { BerthLeaseStatus, Condition } from '../../../src/berth/api.ts';
import {
  acquireFailedStatus,
  admissionRequiredStatus,
  claimsHeld,
  EXPIRED_REASON,
  expiredStatus,
  findCondition,
  formatTime,
  heldStatus,
  invalidSpecStatus,
  parseTime,
  setCondition,
  stoppedStatus,
  stoppingStatus,
  waitingStatus,
} from '../../../src/berth/status.ts';
import { ManualClock } from '../../../src/kube/clock.ts';

const T0 = Date.UTC(2026, 8, 7, 9, 0, 0);

describe('formatTime / parseTime', () => {
  it('writes metav1.Time: UTC, whole seconds, truncated', () => {
    expect(formatTime(T0)).toBe('2026-09-07T09:00:00Z');
    expect(formatTime(T0 + 999)).toBe('2026-09-07T09:00:00Z');
    expect(formatTime(T0 + 1000)).toBe('2026-09-07T09:00:01Z');
    expect(parseTime('2026-09-07T09:00:01Z')).toBe(T0 + 1000);
    expect(parseTime(undefined)).toBeUndefined();
    expect(parseTime('')).toBeUndefined();
    expect(parseTime('yesterday')).toBeUndefined();
  });
});

describe('setCondition', () => {
  const input = {
    type: 'Acquired',
    status: 'True' as const,
    reason: 'Held',
    message: 'lease held with fencing token 1',
  };

  it('adds a new condition with lastTransitionTime now and observedGeneration', () => {
    const out = setCondition(undefined, input, T0, 3);
    expect(out).toEqual([
      {
        type: 'Acquired',
        status: 'True',
        observedGeneration: 3,
        lastTransitionTime: '2026-09-07T09:00:00Z',
        reason: 'Held',
        message: 'lease held with fencing token 1',
      },
    ]);
  });

  it('keeps lastTransitionTime unless the status flips; always stamps generation, reason and message', () => {
    const clock = new ManualClock(T0);
    let conditions: Condition[] = setCondition(undefined, input, clock.now(), 1);
    clock.advance(5_000);
    conditions = setCondition(
      conditions,
      { ...input, message: 'lease held with fencing token 2' },
      clock.now(),
      2,
    );
    expect(conditions[0]).toMatchObject({
      lastTransitionTime: '2026-09-07T09:00:00Z',
      observedGeneration: 2,
      message: 'lease held with fencing token 2',
    });
    clock.advance(5_000);
    conditions = setCondition(
      conditions,
      { type: 'Acquired', status: 'False', reason: 'HeldByOther', message: 'lease held by "b"' },
      clock.now(),
      2,
    );
    expect(conditions[0]).toMatchObject({
      status: 'False',
      lastTransitionTime: '2026-09-07T09:00:10Z',
      reason: 'HeldByOther',
    });
  });

  it('leaves other conditions and their order alone, and does not mutate its input', () => {
    const a = setCondition(undefined, input, T0, 1);
    const both = setCondition(
      a,
      { type: 'HeartbeatHealthy', status: 'True', reason: 'Heartbeating', message: 'lease renewed' },
      T0,
      1,
    );
    const frozen = structuredClone(both);
    const updated = setCondition(
      both,
      { ...input, status: 'False', reason: 'Stopped', message: 'x' },
      T0 + 7000,
      1,
    );
    expect(both).toEqual(frozen);
    expect(updated.map((c) => c.type)).toEqual(['Acquired', 'HeartbeatHealthy']);
    expect(updated[1]).toEqual(both[1]);
  });
});

const stamp = { now: T0, generation: 4 };

describe('status builders', () => {
  it('held: state, holder, token, central times, lastHeartbeat and both conditions', () => {
    const before: BerthLeaseStatus = { tenant: 't', workload: { targetUID: 'u' } };
    const s = heldStatus(
      before,
      { holder: 'cluster-east', fencingToken: 7, acquiredAt: T0 - 60_000, expiresAt: T0 + 30_500 },
      stamp,
    );
    expect(s).toMatchObject({
      tenant: 't',
      workload: { targetUID: 'u' },
      observedGeneration: 4,
      leaseState: 'held',
      currentHolder: 'cluster-east',
      fencingToken: 7,
      acquiredAt: '2026-09-07T08:59:00Z',
      expiresAt: '2026-09-07T09:00:30Z',
      lastHeartbeat: '2026-09-07T09:00:00Z',
    });
    expect(findCondition(s, 'Acquired')).toMatchObject({
      status: 'True',
      reason: 'Held',
      message: 'lease held with fencing token 7',
      observedGeneration: 4,
    });
    expect(findCondition(s, 'HeartbeatHealthy')).toMatchObject({
      status: 'True',
      reason: 'Heartbeating',
      message: 'lease renewed',
    });
    expect(claimsHeld(s)).toBe(true);
    expect(before).toEqual({ tenant: 't', workload: { targetUID: 'u' } });
  });

  it('held: a zero central time is left out', () => {
    const s = heldStatus(
      { acquiredAt: 'old' },
      { holder: 'a', fencingToken: 1, acquiredAt: undefined, expiresAt: T0 },
      stamp,
    );
    expect(s.acquiredAt).toBeUndefined();
    expect('acquiredAt' in s).toBe(false);
  });

  it('waiting: token 0, the other holder and expiry, no acquiredAt, HeldByOther and Standby', () => {
    const held = heldStatus(
      undefined,
      { holder: 'a', fencingToken: 3, acquiredAt: T0, expiresAt: T0 + 30_000 },
      stamp,
    );
    const s = waitingStatus(
      held,
      { holder: 'cluster-west', expiresAt: T0 + 20_000 },
      { now: T0 + 1000, generation: 4 },
    );
    expect(s).toMatchObject({
      leaseState: 'waiting',
      fencingToken: 0,
      currentHolder: 'cluster-west',
      expiresAt: '2026-09-07T09:00:20Z',
      lastHeartbeat: '2026-09-07T09:00:00Z',
    });
    expect('acquiredAt' in s).toBe(false);
    expect(findCondition(s, 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'HeldByOther',
      message: 'lease held by "cluster-west"',
      lastTransitionTime: '2026-09-07T09:00:01Z',
    });
    expect(findCondition(s, 'HeartbeatHealthy')).toMatchObject({
      status: 'True',
      reason: 'Standby',
      message: 'monitoring for reacquire',
      // True before (Heartbeating) and True now: the transition time is kept.
      lastTransitionTime: '2026-09-07T09:00:00Z',
    });
    expect(claimsHeld(s)).toBe(false);
  });

  it('acquire failed: only HeartbeatHealthy changes; state, token and Acquired stay', () => {
    const held = heldStatus(
      undefined,
      { holder: 'a', fencingToken: 3, acquiredAt: T0, expiresAt: T0 + 30_000 },
      stamp,
    );
    const s = acquireFailedStatus(held, 'acquire ns/x: server status 500: internal error', stamp);
    expect(s.leaseState).toBe('held');
    expect(s.fencingToken).toBe(3);
    expect(findCondition(s, 'Acquired')).toEqual(findCondition(held, 'Acquired'));
    expect(findCondition(s, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'AcquireFailed',
      message: 'acquire ns/x: server status 500: internal error',
    });
  });

  it('expired: no longer claims the lease; Acquired=False/Expired and AcquireFailed', () => {
    const held = heldStatus(
      undefined,
      { holder: 'a', fencingToken: 3, acquiredAt: T0, expiresAt: T0 + 3_000 },
      stamp,
    );
    const s = expiredStatus(held, 'boom', { now: T0 + 4000, generation: 4 });
    expect(s).toMatchObject({
      leaseState: 'waiting',
      fencingToken: 0,
      currentHolder: '',
      expiresAt: '2026-09-07T09:00:03Z',
    });
    expect(findCondition(s, 'Acquired')).toMatchObject({
      status: 'False',
      reason: EXPIRED_REASON,
      message: 'lease expired at 2026-09-07T09:00:03Z without renewal',
    });
    expect(findCondition(s, 'HeartbeatHealthy')).toMatchObject({
      status: 'False',
      reason: 'AcquireFailed',
      message: 'boom',
    });
    expect(claimsHeld(s)).toBe(false);
  });

  it('invalid spec and admission required set Acquired=False with the message', () => {
    expect(
      findCondition(invalidSpecStatus(undefined, 'spec.ttlSeconds must be positive', stamp), 'Acquired'),
    ).toMatchObject({
      status: 'False',
      reason: 'InvalidSpec',
      message: 'spec.ttlSeconds must be positive',
      observedGeneration: 4,
    });
    expect(findCondition(admissionRequiredStatus({}, 'm', stamp), 'Acquired')).toMatchObject({
      status: 'False',
      reason: 'AdmissionRequired',
      message: 'm',
    });
  });

  it('stopping (managed) creates the workload record from the recorded identity', () => {
    const s = stoppingStatus({ currentHolder: 'cluster-east', fencingToken: 7 }, 'shared', stamp);
    expect(s.workload).toEqual({
      targetUID: '',
      leaseName: 'shared',
      holder: 'cluster-east',
      token: 7,
      phase: 'Stopping',
    });
    expect(findCondition(s, 'HeartbeatHealthy')).toMatchObject({
      reason: 'Stopping',
      message: 'workload activation is closed during cleanup',
    });
    expect(findCondition(s, 'Acquired')).toMatchObject({
      reason: 'Stopping',
      message: 'waiting for managed Pods to terminate',
    });
  });

  it('stopped (managed) resets the workload record but keeps targetUID', () => {
    const s = stoppedStatus(
      {
        leaseState: 'held',
        currentHolder: 'x',
        fencingToken: 7,
        expiresAt: 'e',
        acquiredAt: 'a',
        workload: {
          targetUID: 'u',
          phase: 'Stopping',
          holder: 'x',
          token: 7,
          leaseName: 'l',
          deadline: 'd',
          pods: [{ name: 'p', uid: '1' }],
        },
      },
      stamp,
    );
    expect(s).toMatchObject({ leaseState: 'waiting', fencingToken: 0, currentHolder: '' });
    expect(s.workload).toEqual({ targetUID: 'u', phase: '', leaseName: '', holder: '', token: 0 });
    expect('expiresAt' in s || 'acquiredAt' in s).toBe(false);
    expect(findCondition(s, 'Acquired')).toMatchObject({
      reason: 'Stopped',
      message: 'managed Pods stopped',
    });
  });
});
