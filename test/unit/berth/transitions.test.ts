import { describe, expect, it } from 'vitest';
import { acquireFailedStatus, expiredStatus, heldStatus, waitingStatus } from '../../../src/berth/status.ts';
import { transitionsOf } from '../../../src/berth/transitions.ts';

const T0 = Date.UTC(2026, 8, 7, 9, 0, 0);
const stamp = { now: T0, generation: 1 };
const held = (token: number) =>
  heldStatus(
    undefined,
    { holder: 'cluster-east', fencingToken: token, acquiredAt: T0, expiresAt: T0 + 30_000 },
    stamp,
  );
const waiting = waitingStatus(undefined, { holder: 'cluster-west', expiresAt: T0 }, stamp);

describe('transitionsOf', () => {
  it('reports acquiring, from nothing or from waiting', () => {
    expect(transitionsOf(undefined, held(1))).toEqual([
      { kind: 'acquired', holder: 'cluster-east', fencingToken: 1 },
    ]);
    expect(transitionsOf(waiting, held(2))).toEqual([
      { kind: 'acquired', holder: 'cluster-east', fencingToken: 2 },
    ]);
  });

  it('reports a new ownership epoch (another token) as acquired, a renewal as nothing', () => {
    expect(transitionsOf(held(1), held(2))).toEqual([
      { kind: 'acquired', holder: 'cluster-east', fencingToken: 2 },
    ]);
    expect(transitionsOf(held(1), held(1))).toEqual([]);
    expect(transitionsOf(waiting, waiting)).toEqual([]);
  });

  it('reports losing to another holder and expiring, with the Acquired message', () => {
    expect(
      transitionsOf(held(1), waitingStatus(held(1), { holder: 'cluster-west', expiresAt: T0 }, stamp)),
    ).toEqual([{ kind: 'lost', reason: 'HeldByOther', detail: 'lease held by "cluster-west"' }]);
    expect(transitionsOf(held(1), expiredStatus(held(1), 'down', stamp))).toEqual([
      { kind: 'lost', reason: 'Expired', detail: 'lease expired at 2026-09-07T09:00:30Z without renewal' },
      { kind: 'unhealthy', detail: 'down' },
    ]);
  });

  it('reports becoming unhealthy once, not on every failed retry', () => {
    const failed = acquireFailedStatus(held(1), 'down', stamp);
    expect(transitionsOf(held(1), failed)).toEqual([{ kind: 'unhealthy', detail: 'down' }]);
    expect(transitionsOf(failed, acquireFailedStatus(failed, 'still down', stamp))).toEqual([]);
    expect(transitionsOf(failed, held(1))).toEqual([]);
  });
});
