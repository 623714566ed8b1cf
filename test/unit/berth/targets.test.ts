// Target actions (docs/behaviour.md §2.6, §6.2 15 and 29) and the identity check of verifyTarget (§2.3 step 6).
import { describe, expect, it } from 'vitest';
import { ReconcileError, STOP_FENCE } from '../../../src/berth/api.ts';
import {
  applyTargetAction,
  planTargetAction,
  stopAction,
  TARGET_WRITE_ATTEMPTS,
  targetIdentityError,
} from '../../../src/berth/targets.ts';
import { deployment, managedLease, TARGET_UID } from './managed-fixtures.ts';
import { conflictError, FakeWorkloadApi } from './workload-fakes.ts';

describe('planTargetAction', () => {
  const live = (replicas: number | undefined, fence?: string) =>
    deployment(replicas, {
      resourceVersion: '5',
      ...(fence === undefined ? {} : { annotations: { [STOP_FENCE]: fence } }),
    });

  it('writes nothing at the desired state, and exactly the changed field otherwise, guarded by version and uid', () => {
    expect(planTargetAction(live(3), { scale: { replicas: 3 } })).toBeUndefined();
    expect(planTargetAction(live(1), { scale: { replicas: 3 } })).toEqual({
      metadata: { resourceVersion: '5', uid: TARGET_UID },
      spec: { replicas: 3 },
    });
    // An absent field converges with one write (and none after it).
    expect(planTargetAction(live(undefined), { scale: { replicas: 1 } })).toMatchObject({
      spec: { replicas: 1 },
    });
    const cron = { metadata: { name: 'c', uid: 'u', resourceVersion: '9' }, spec: { suspend: true } };
    expect(planTargetAction(cron, { suspend: true })).toBeUndefined();
    expect(planTargetAction(cron, { suspend: false })).toEqual({
      metadata: { resourceVersion: '9', uid: 'u' },
      spec: { suspend: false },
    });
    expect(() => planTargetAction(live(1), {})).toThrow(ReconcileError.emptyAction);
  });

  it('a stop writes the fence even when already stopped (always), once per fence value', () => {
    const fence = { value: '42', mode: 'always' as const };
    expect(planTargetAction(live(0), { scale: { replicas: 0 } }, fence)).toEqual({
      metadata: { resourceVersion: '5', uid: TARGET_UID, annotations: { [STOP_FENCE]: '42' } },
    });
    expect(planTargetAction(live(0, '42'), { scale: { replicas: 0 } }, fence)).toBeUndefined();
    expect(planTargetAction(live(2, '42'), { scale: { replicas: 0 } }, fence)).toEqual({
      metadata: { resourceVersion: '5', uid: TARGET_UID },
      spec: { replicas: 0 },
    });
  });

  it('a standby stop (with-change) writes only when the spec must change, the fence riding along', () => {
    const fence = { value: '42', mode: 'with-change' as const };
    expect(planTargetAction(live(0), { scale: { replicas: 0 } }, fence)).toBeUndefined();
    expect(planTargetAction(live(2), { scale: { replicas: 0 } }, fence)).toEqual({
      metadata: { resourceVersion: '5', uid: TARGET_UID, annotations: { [STOP_FENCE]: '42' } },
      spec: { replicas: 0 },
    });
  });

  it('stops scalable targets by scaling to zero and CronJobs by suspending', () => {
    expect(stopAction({ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'x' })).toEqual({
      scale: { replicas: 0 },
    });
    expect(stopAction({ apiVersion: 'batch/v1', kind: 'CronJob', name: 'x' })).toEqual({ suspend: true });
  });
});

describe('targetIdentityError', () => {
  it('accepts only the admitted target carrying this lease binding', () => {
    const lease = managedLease();
    expect(targetIdentityError(lease, deployment(3))).toBeUndefined();
    expect(targetIdentityError(lease, deployment(3, { uid: 'other' }))).toBe(ReconcileError.identityMismatch);
    expect(targetIdentityError(lease, deployment(3, { annotations: {} }))).toBe(
      ReconcileError.identityMismatch,
    );
    expect(targetIdentityError(managedLease({ targetUID: '' }), deployment(3))).toBe(
      ReconcileError.identityMismatch,
    );
  });
});

describe('applyTargetAction', () => {
  it('never touches a replacement (stops skip it, activations fail with "target UID changed")', async () => {
    const api = new FakeWorkloadApi();
    api.put('Deployment', deployment(3, { uid: 'replacement' }));
    const lease = managedLease();
    expect(
      await applyTargetAction(
        api,
        lease,
        { scale: { replicas: 0 } },
        { expectedUID: TARGET_UID, onReplaced: 'skip' },
      ),
    ).toEqual({ outcome: 'replaced', uid: 'replacement' });
    await expect(
      applyTargetAction(
        api,
        lease,
        { scale: { replicas: 5 } },
        { expectedUID: TARGET_UID, onReplaced: 'error' },
      ),
    ).rejects.toThrow(ReconcileError.targetUIDChanged);
    expect(api.writes()).toEqual([]);
  });

  it('a missing target is nothing to do', async () => {
    const api = new FakeWorkloadApi();
    expect(
      await applyTargetAction(api, managedLease(), { scale: { replicas: 3 } }, { onReplaced: 'error' }),
    ).toEqual({
      outcome: 'absent',
    });
  });

  it('re-reads and decides again after a conflict, a bounded number of times', async () => {
    const api = new FakeWorkloadApi();
    api.put('Deployment', deployment(0));
    api.failures.set('patch Deployment/web', [conflictError()]);
    const write = await applyTargetAction(
      api,
      managedLease(),
      { scale: { replicas: 3 } },
      { onReplaced: 'error' },
    );
    expect(write.outcome).toBe('written');
    expect(api.stored('Deployment', 'web')?.spec?.replicas).toBe(3);
    api.failures.set('patch Deployment/web', Array.from({ length: TARGET_WRITE_ATTEMPTS }, conflictError));
    await expect(
      applyTargetAction(api, managedLease(), { scale: { replicas: 1 } }, { onReplaced: 'error' }),
    ).rejects.toThrow(/Conflict/);
  });

  it('an aborted reconcile never retries its write', async () => {
    const api = new FakeWorkloadApi();
    api.put('Deployment', deployment(0));
    api.failures.set('patch Deployment/web', [conflictError()]);
    const aborted = new AbortController();
    aborted.abort();
    await expect(
      applyTargetAction(
        api,
        managedLease(),
        { scale: { replicas: 3 } },
        { onReplaced: 'error', signal: aborted.signal },
      ),
    ).rejects.toThrow(/Conflict/);
    expect(api.calls.filter((c) => c.startsWith('patch'))).toHaveLength(1);
  });
});
