import { describe, expect, it } from 'vitest';
import {
  decideLeader,
  expiresAt,
  type LeaderElectionRecord,
  leaseDurationSeconds,
  leaseSpecFromRecord,
  nextAttemptDelay,
  type Observation,
  observe,
  recordFromLease,
  releasedRecord,
  validateLeaderTimings,
} from '../../../src/kube/leader-decision.ts';
import { formatMicroTime } from '../../../src/kube/microtime.ts';
import { MICROTIME, record, T0 } from './leader-fixtures.ts';

const opts = { leaseDurationMs: 15_000 };

describe('MicroTime and record conversion', () => {
  it('formats exactly six fractional digits', () => {
    expect(formatMicroTime(T0 + 278)).toBe('2026-01-01T00:00:00.278000Z');
    expect(formatMicroTime(T0)).toMatch(MICROTIME);
    expect(Date.parse(formatMicroTime(T0 + 1234))).toBe(T0 + 1234);
  });

  it('stores whole seconds, rounding up', () => {
    expect(leaseDurationSeconds(15_000)).toBe(15);
    expect(leaseDurationSeconds(1_500)).toBe(2);
    expect(leaseDurationSeconds(200)).toBe(1);
  });

  it('round-trips a record through a Lease spec, keeping server strings verbatim', () => {
    const r = record({ renewTime: '2026-01-01T00:00:05.123456Z' });
    const back = recordFromLease({ spec: leaseSpecFromRecord(r) });
    expect(back).toEqual(r);
    // What goes on the wire is the string itself.
    expect(JSON.parse(JSON.stringify(leaseSpecFromRecord(r))).renewTime).toBe('2026-01-01T00:00:05.123456Z');
    expect(recordFromLease({})).toEqual({
      holderIdentity: '',
      leaseDurationSeconds: 0,
      acquireTime: undefined,
      renewTime: undefined,
      leaseTransitions: 0,
    });
  });

  it('validates timings like client-go', () => {
    expect(
      validateLeaderTimings({ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 }),
    ).toBe(undefined);
    expect(
      validateLeaderTimings({ leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 }),
    ).toMatch(/lease duration must be greater/);
    expect(
      validateLeaderTimings({ leaseDurationMs: 15_000, renewDeadlineMs: 2_400, retryPeriodMs: 2_000 }),
    ).toMatch(/renew deadline must be greater than retry period/);
    expect(
      validateLeaderTimings({ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 0 }),
    ).toMatch(/retry period/);
  });
});

describe('observe', () => {
  it('keeps the observation time while the record is unchanged and restarts it on any change', () => {
    const first = observe(undefined, record(), 1_000);
    expect(first.observedAt).toBe(1_000);
    expect(observe(first, record(), 9_000)).toBe(first);
    expect(observe(first, record({ renewTime: formatMicroTime(T0 + 2_000) }), 9_000).observedAt).toBe(9_000);
    expect(observe(first, record({ leaseTransitions: 4 }), 9_000).observedAt).toBe(9_000);
  });
});

describe('decideLeader', () => {
  const seen = (r: LeaderElectionRecord, at: number): Observation => ({ record: r, observedAt: at });

  it('creates the Lease when there is none', () => {
    const d = decideLeader(undefined, T0, 'me', opts);
    expect(d.action).toBe('create');
    expect(d.record).toEqual({
      holderIdentity: 'me',
      leaseDurationSeconds: 15,
      acquireTime: formatMicroTime(T0),
      renewTime: formatMicroTime(T0),
      leaseTransitions: 0,
    });
  });

  it('waits while another holder has not expired, and acquires once it has (not before)', () => {
    const obs = seen(record(), 50_000);
    expect(decideLeader(obs, 50_000 + 14_999, 'me', opts)).toEqual({
      action: 'wait',
      holder: 'other',
      expiresAt: 65_000,
    });
    const d = decideLeader(obs, 65_000, 'me', opts);
    expect(d.action).toBe('acquire');
    if (d.action !== 'acquire') return;
    expect(d.record.holderIdentity).toBe('me');
    expect(d.record.leaseTransitions).toBe(4);
    expect(d.record.acquireTime).toBe(formatMicroTime(65_000));
  });

  it("uses the holder's lease duration from the record, not its own", () => {
    const obs = seen(record({ leaseDurationSeconds: 60 }), 0);
    expect(decideLeader(obs, 30_000, 'me', opts).action).toBe('wait');
    expect(decideLeader(obs, 60_000, 'me', opts).action).toBe('acquire');
  });

  it('renews its own lease keeping acquireTime and leaseTransitions', () => {
    const mine = record({
      holderIdentity: 'me',
      acquireTime: '2025-12-31T23:00:00.000001Z',
      leaseTransitions: 7,
    });
    const d = decideLeader(seen(mine, 0), 5_000, 'me', opts);
    expect(d).toEqual({
      action: 'renew',
      record: { ...mine, renewTime: formatMicroTime(5_000), leaseDurationSeconds: 15 },
    });
  });

  it('acquires a released lease at once', () => {
    const released = releasedRecord(record(), T0);
    expect(released).toMatchObject({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 3 });
    const d = decideLeader(seen(released, T0), T0, 'me', opts);
    expect(d.action).toBe('acquire');
  });

  it('judges expiry by the local observation time, never by remote timestamps (clock skew)', () => {
    // The holder's clock is an hour behind: its renewTime looks ancient, but we just saw it change.
    const behind = record({ renewTime: formatMicroTime(T0 - 3_600_000) });
    expect(decideLeader(observe(undefined, behind, T0), T0 + 1_000, 'me', opts).action).toBe('wait');
    // The holder's clock is an hour ahead: its renewTime is in our future, yet it stopped changing
    // more than a lease duration ago, so it has expired.
    const ahead = record({ renewTime: formatMicroTime(T0 + 3_600_000) });
    let obs = observe(undefined, ahead, T0);
    obs = observe(obs, ahead, T0 + 10_000); // re-read, unchanged: the clock does not restart
    expect(decideLeader(obs, T0 + 15_000, 'me', opts).action).toBe('acquire');
    expect(expiresAt(obs)).toBe(T0 + 15_000);
  });
});

describe('nextAttemptDelay', () => {
  it('jitters the retry period like client-go and wakes at expiry when that is sooner', () => {
    expect(nextAttemptDelay(undefined, 0, 2_000, 0)).toBe(2_000);
    expect(nextAttemptDelay(undefined, 0, 2_000, 0.5)).toBeCloseTo(3_200);
    const wait = { action: 'wait', holder: 'x', expiresAt: 500 } as const;
    expect(nextAttemptDelay(wait, 0, 2_000, 0.5)).toBe(501);
    expect(nextAttemptDelay(wait, 499, 2_000, 0)).toBe(2);
    expect(nextAttemptDelay({ ...wait, expiresAt: 10_000 }, 0, 2_000, 0)).toBe(2_000);
  });
});
