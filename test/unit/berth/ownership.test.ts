// ownership.ts: TestReacquireIntervalCaps, the local deadline, activeAt, forced stops, the sanity check
// of a central answer, the release identity and every budget/requeue of docs/behaviour.md §2.9.
import { describe, expect, it } from 'vitest';
import type { BerthLease, BerthLeaseStatus } from '../../../src/berth/api.ts';
import type { AcquireResult } from '../../../src/berth/leaseclient.ts';
import {
  acquireBudgetMs,
  acquireErrorRequeueMs,
  activationEnd,
  activeAt,
  checkCentralAnswer,
  forcedStopReason,
  heldPastExpiry,
  heldRequeueMs,
  ownershipDeadline,
  reacquireIntervalMs,
  releaseIdentity,
  shouldRelease,
  standbyNeedsStop,
  stopAfterAcquireError,
  stopLeadFor,
} from '../../../src/berth/ownership.ts';
import { formatTime } from '../../../src/berth/status.ts';
import { BerthLeaseBuilder } from '../../builders/berthlease.ts';

const T0 = Date.UTC(2026, 8, 7, 9, 0, 0);
const S = 1000;

function lease(status?: BerthLeaseStatus, extra: { deleting?: boolean; target?: boolean } = {}): BerthLease {
  const b = new BerthLeaseBuilder('l').namespace('ns').leaseName('shared').holderIdentity('spec-holder');
  if (extra.deleting) b.deleting(formatTime(T0));
  if (extra.target) b.targets('Deployment', 'web').scales(3);
  if (status !== undefined) b.status(status);
  return b.obj();
}

const active = (deadline: number, token = 7, holder = 'cluster-east'): BerthLeaseStatus => ({
  workload: {
    targetUID: 'u',
    phase: 'Active',
    holder,
    token,
    leaseName: 'shared',
    deadline: formatTime(deadline),
  },
});

describe('reacquireIntervalMs (TestReacquireIntervalCaps)', () => {
  it.each([
    [5, 30, 5],
    [10, 30, 10],
    [20, 30, 10],
    [0, 30, 10],
    [1, 3, 1],
  ])('heartbeat %ss, ttl %ss -> %ss', (hb, ttl, want) => {
    expect(reacquireIntervalMs(hb * S, ttl * S)).toBe(want * S);
  });

  it('is bounded: 0 < requeue <= ttl/3 (TestReconcileNotHeldRequeueIsBounded)', () => {
    for (let hb = 1; hb < 30; hb++) {
      const r = reacquireIntervalMs(hb * S, 30 * S);
      expect(r).toBeGreaterThan(0);
      expect(r).toBeLessThanOrEqual(10 * S);
    }
  });
});

describe('ownershipDeadline', () => {
  it('is min(start + ttl, expiry), truncated to the second', () => {
    expect(ownershipDeadline(T0 + 400, 30 * S, T0 + 60 * S)).toBe(T0 + 30 * S);
    expect(ownershipDeadline(T0, 30 * S, T0 + 20_700)).toBe(T0 + 20 * S);
    // A central clock far ahead cannot extend the local TTL.
    expect(ownershipDeadline(T0, 30 * S, T0 + 3_600 * S)).toBe(T0 + 30 * S);
  });
});

describe('activeAt and forced stops', () => {
  it('activeAt needs phase Active, a future deadline, a token and no deletion', () => {
    expect(activeAt(lease(active(T0 + S)), T0, 0)).toBe(true);
    expect(activeAt(lease(active(T0)), T0, 0)).toBe(false);
    expect(activeAt(lease(active(T0 + S, 0)), T0, 0)).toBe(false);
    expect(activeAt(lease(active(T0 + S), { deleting: true }), T0, 0)).toBe(false);
    expect(activeAt(lease({ workload: { targetUID: 'u', phase: 'Stopping' } }), T0, 0)).toBe(false);
    expect(activeAt(lease(), T0, 0)).toBe(false);
  });

  it('activeAt ends the stop lead before the deadline; forced stops and acquire errors follow it', () => {
    const deadline = T0 + 5 * S;
    expect(activeAt(lease(active(deadline)), T0, 5 * S - 1)).toBe(true);
    expect(activeAt(lease(active(deadline)), T0, 5 * S)).toBe(false);
    expect(activationEnd(lease(active(deadline)), 2 * S)).toBe(deadline - 2 * S);
    expect(activationEnd(lease(), 2 * S)).toBeUndefined();
    expect(forcedStopReason(lease(active(deadline)), 'cluster-east', undefined, T0, 5 * S)).toBe(
      'activation expired',
    );
    expect(stopAfterAcquireError(lease(active(deadline)), T0 + 3 * S, 2 * S)).toBe(true);
    expect(stopAfterAcquireError(lease(active(deadline)), T0 + 3 * S - 1, 2 * S)).toBe(false);
  });

  it('stopLeadFor: the configured lead for a managed lease, none for a lease-only one', () => {
    expect(stopLeadFor(lease(undefined, { target: true }), 5 * S)).toBe(5 * S);
    expect(stopLeadFor(lease(), 5 * S)).toBe(0);
  });

  it('forcedStopReason: deleting, stopping, expired, other holder, invalid spec', () => {
    expect(forcedStopReason(lease(undefined, { deleting: true }), 'h', undefined, T0, 0)).toBe('deleting');
    expect(
      forcedStopReason(lease({ workload: { targetUID: 'u', phase: 'Stopping' } }), 'h', undefined, T0, 0),
    ).toBe('stopping');
    expect(forcedStopReason(lease(active(T0)), 'cluster-east', undefined, T0, 0)).toBe('activation expired');
    expect(forcedStopReason(lease(active(T0 + S)), 'cluster-west', undefined, T0, 0)).toBe(
      'holder identity changed',
    );
    expect(forcedStopReason(lease(active(T0 + S)), 'cluster-east', 'bad', T0, 0)).toBe('spec invalid');
    expect(forcedStopReason(lease(active(T0 + S)), 'cluster-east', undefined, T0, 0)).toBeUndefined();
    // Lease-only leases are only stopped for deletion.
    expect(
      forcedStopReason(lease({ leaseState: 'held', fencingToken: 3 }), 'x', 'bad', T0, 0),
    ).toBeUndefined();
  });

  it('stopAfterAcquireError: an expired activation, or a legacy target past its recorded expiry', () => {
    expect(stopAfterAcquireError(lease(active(T0)), T0, 0)).toBe(true);
    expect(stopAfterAcquireError(lease(active(T0 + S)), T0, 0)).toBe(false);
    expect(stopAfterAcquireError(lease({ expiresAt: formatTime(T0 - S) }, { target: true }), T0, 0)).toBe(
      true,
    );
    expect(stopAfterAcquireError(lease({ expiresAt: formatTime(T0 + S) }, { target: true }), T0, 0)).toBe(
      false,
    );
    expect(stopAfterAcquireError(lease({ expiresAt: formatTime(T0 - S) }), T0, 0)).toBe(false);
  });

  it('heldPastExpiry: a held status at or after its recorded expiry', () => {
    const held = (expiresAt: number): BerthLeaseStatus => ({
      leaseState: 'held',
      fencingToken: 1,
      expiresAt: formatTime(expiresAt),
    });
    expect(heldPastExpiry(lease(held(T0)), T0)).toBe(true);
    expect(heldPastExpiry(lease(held(T0 + S)), T0)).toBe(false);
    expect(heldPastExpiry(lease({ leaseState: 'waiting', expiresAt: formatTime(T0 - S) }), T0)).toBe(false);
  });

  it('standbyNeedsStop: only an activation (or a legacy held record) needs the stop cycle', () => {
    expect(standbyNeedsStop(lease(active(T0 + S), { target: true }))).toBe(true);
    expect(
      standbyNeedsStop(lease({ workload: { targetUID: 'u', phase: 'Stopping' } }, { target: true })),
    ).toBe(true);
    expect(standbyNeedsStop(lease({ workload: { targetUID: 'u', phase: '' } }, { target: true }))).toBe(
      false,
    );
    expect(standbyNeedsStop(lease({ workload: { targetUID: 'u' } }, { target: true }))).toBe(false);
    expect(standbyNeedsStop(lease({ leaseState: 'held', fencingToken: 2 }, { target: true }))).toBe(true);
    expect(standbyNeedsStop(lease({ leaseState: 'waiting', fencingToken: 0 }, { target: true }))).toBe(false);
  });
});

describe('checkCentralAnswer', () => {
  const ok: AcquireResult = {
    acquired: true,
    holder: 'cluster-east',
    fencingToken: 1,
    expiresAt: T0 + S,
    acquiredAt: T0,
  };
  it('accepts a positive token, our holder and a future expiry', () => {
    expect(checkCentralAnswer(ok, 'cluster-east', T0)).toBeUndefined();
  });
  it.each([
    ['token 0', { fencingToken: 0 }],
    ['negative token', { fencingToken: -1 }],
    ['another holder', { holder: 'cluster-west' }],
    ['expiry now', { expiresAt: T0 }],
    ['expiry in the past', { expiresAt: T0 - 1 }],
    ['no expiry', { expiresAt: undefined }],
  ])('refuses %s', (_name, change) => {
    expect(checkCentralAnswer({ ...ok, ...change }, 'cluster-east', T0)).toBe(
      'invalid central ownership response',
    );
  });
});

describe('releaseIdentity', () => {
  it('prefers the workload record, else the status and spec.leaseName', () => {
    expect(releaseIdentity(lease({ currentHolder: 'cluster-east', fencingToken: 7 }))).toEqual({
      leaseName: 'shared',
      holder: 'cluster-east',
      fencingToken: 7,
    });
    expect(
      releaseIdentity(
        lease({
          currentHolder: 'x',
          fencingToken: 9,
          workload: { targetUID: 'u', leaseName: 'old-name', holder: 'cluster-east', token: 7 },
        }),
      ),
    ).toEqual({ leaseName: 'old-name', holder: 'cluster-east', fencingToken: 7 });
  });
  it('releases only with a holder and a positive token', () => {
    expect(shouldRelease({ leaseName: 'l', holder: 'h', fencingToken: 1 })).toBe(true);
    expect(shouldRelease({ leaseName: 'l', holder: '', fencingToken: 1 })).toBe(false);
    expect(shouldRelease({ leaseName: 'l', holder: 'h', fencingToken: 0 })).toBe(false);
  });
});

describe('budgets and requeues (§2.9)', () => {
  it('acquire budget: min(heartbeat, 2.5 s, time to the active deadline)', () => {
    expect(acquireBudgetMs(10 * S, T0)).toBe(2_500);
    expect(acquireBudgetMs(1 * S, T0)).toBe(1_000);
    expect(acquireBudgetMs(10 * S, T0, T0 + 100)).toBe(100);
    expect(acquireBudgetMs(10 * S, T0, T0 + 60 * S)).toBe(2_500);
  });
  it('held requeue: min(heartbeat, time to the deadline)', () => {
    expect(heldRequeueMs(10 * S, T0 + 30 * S, T0, 0)).toBe(10 * S);
    expect(heldRequeueMs(10 * S, T0 + 4 * S, T0, 0)).toBe(4 * S);
    expect(heldRequeueMs(10 * S, T0, T0, 0)).toBe(1);
    // The activation ends the stop lead before the deadline: so does the wait for the next renewal.
    expect(heldRequeueMs(10 * S, T0 + 12 * S, T0, 5 * S)).toBe(7 * S);
    expect(heldRequeueMs(10 * S, T0 + 4 * S, T0, 5 * S)).toBe(1);
  });
  it('acquire error requeue: min(heartbeat, 1 s), capped by a future deadline', () => {
    expect(acquireErrorRequeueMs(10 * S, T0)).toBe(1_000);
    expect(acquireErrorRequeueMs(500, T0)).toBe(500);
    expect(acquireErrorRequeueMs(10 * S, T0, T0 + 300)).toBe(300);
    expect(acquireErrorRequeueMs(10 * S, T0, T0 + 60 * S)).toBe(1_000);
    expect(acquireErrorRequeueMs(10 * S, T0, T0 - 1)).toBe(1_000);
  });
});
