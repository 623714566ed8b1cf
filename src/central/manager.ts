// The lease manager (docs/behaviour.md §3.7): acquire, renew and release over any Store with
// compare-and-swap on the record version, so two writes prepared from the same observed state can never
// both land. The decisions (what to write, what to answer) are pure functions of (record, request, now);
// the manager only runs them against the store.
import { type Clock, realClock } from '../kube/clock.ts';
import {
  expiresAt,
  INT32_MAX,
  isExpired,
  isReclaimable,
  isTombstone,
  keyString,
  type LeaseKey,
  type LeaseRecord,
  tombstoneOf,
} from './record.ts';
import { isStoreConflict, type Store } from './store.ts';

/** The answer to acquire and renew (the wire's LeaseResponse); times are epoch ms, undefined = absent. */
export interface LeaseResult {
  acquired: boolean;
  /** When not acquired: the current holder ("" for a tombstone or an absent lease). */
  holder: string;
  fencingToken: number;
  expiresAt: number | undefined;
  acquiredAt: number | undefined;
}

/** Release by a holder or token that does not own the lease (HTTP 409). */
export class ReleaseConflictError extends Error {
  constructor(key: LeaseKey) {
    super(`release ${keyString(key)}: lease held by another identity or token`);
    this.name = 'ReleaseConflictError';
  }
}

/** An internal failure of the manager (HTTP 500): exhausted retries, token ceiling, bad arguments. */
export class LeaseManagerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LeaseManagerError';
  }
}

export const MAX_ACQUIRE_ATTEMPTS = 8;

const stateOf = (record: LeaseRecord, acquired: boolean): LeaseResult => ({
  acquired,
  holder: record.holder,
  fencingToken: record.fencingToken,
  expiresAt: expiresAt(record),
  acquiredAt: record.acquiredAt,
});

const ABSENT: LeaseResult = {
  acquired: false,
  holder: '',
  fencingToken: 0,
  expiresAt: undefined,
  acquiredAt: undefined,
};

// ---------------------------------------------------------------------------------------------------
// Pure decisions

export type AcquireDecision =
  | { kind: 'write'; record: LeaseRecord }
  | { kind: 'held-by-other'; result: LeaseResult }
  | { kind: 'token-exhausted' };

/** What Acquire does given the stored record (undefined = absent). */
export function decideAcquire(
  current: LeaseRecord | undefined,
  key: LeaseKey,
  holder: string,
  ttlMs: number,
  now: number,
): AcquireDecision {
  if (current === undefined) {
    return {
      kind: 'write',
      record: { key, holder, ttlMs, acquiredAt: now, renewedAt: now, fencingToken: 1, version: 0 },
    };
  }
  if (!isTombstone(current) && current.holder === holder && !isExpired(current, now)) {
    // Renew in place: the token and acquiredAt are kept.
    return { kind: 'write', record: { ...current, renewedAt: now, ttlMs } };
  }
  if (isReclaimable(current, now)) {
    if (current.fencingToken >= INT32_MAX) return { kind: 'token-exhausted' };
    return {
      kind: 'write',
      record: {
        ...current,
        holder,
        ttlMs,
        acquiredAt: now,
        renewedAt: now,
        fencingToken: current.fencingToken + 1,
      },
    };
  }
  return { kind: 'held-by-other', result: stateOf(current, false) };
}

export type RenewDecision = { kind: 'write'; record: LeaseRecord } | { kind: 'refuse'; result: LeaseResult };

/** What Renew does given the stored record: only the unexpired holder with the same token renews. */
export function decideRenew(
  current: LeaseRecord | undefined,
  holder: string,
  token: number,
  ttlMs: number,
  now: number,
): RenewDecision {
  if (current === undefined) return { kind: 'refuse', result: ABSENT };
  if (
    isTombstone(current) ||
    current.holder !== holder ||
    current.fencingToken !== token ||
    isExpired(current, now)
  )
    return { kind: 'refuse', result: stateOf(current, false) };
  return { kind: 'write', record: { ...current, renewedAt: now, ttlMs } };
}

export type ReleaseDecision =
  | { kind: 'done' }
  | { kind: 'conflict' }
  | { kind: 'write'; record: LeaseRecord };

/** What Release does: idempotent for absent leases and tombstones; expired leases can still be released. */
export function decideRelease(
  current: LeaseRecord | undefined,
  holder: string,
  token: number,
  now: number,
): ReleaseDecision {
  if (current === undefined || isTombstone(current)) return { kind: 'done' };
  if (current.holder !== holder || current.fencingToken !== token) return { kind: 'conflict' };
  return { kind: 'write', record: tombstoneOf(current, now) };
}

// ---------------------------------------------------------------------------------------------------
// The manager

export interface LeaseManagerOptions {
  store: Store;
  clock?: Clock;
}

export class LeaseManager {
  readonly #store: Store;
  readonly #clock: Clock;

  constructor(options: LeaseManagerOptions) {
    this.#store = options.store;
    this.#clock = options.clock ?? realClock;
  }

  async acquire(key: LeaseKey, holder: string, ttlMs: number): Promise<LeaseResult> {
    if (holder === '') throw new LeaseManagerError('acquire: holder is required');
    if (!(ttlMs > 0)) throw new LeaseManagerError('acquire: ttl must be positive');
    for (let attempt = 0; attempt < MAX_ACQUIRE_ATTEMPTS; attempt++) {
      const current = await this.#store.get(key);
      const decision = decideAcquire(current, key, holder, ttlMs, this.#clock.now());
      if (decision.kind === 'held-by-other') return decision.result;
      if (decision.kind === 'token-exhausted')
        throw new LeaseManagerError(`fencing token for ${keyString(key)} exhausted at int32 ceiling`);
      try {
        const stored = await this.#store.put(current?.version ?? 0, decision.record);
        return stateOf(stored, true);
      } catch (err) {
        if (!isStoreConflict(err)) throw err;
      }
    }
    throw new LeaseManagerError('acquire: exhausted retries');
  }

  async renew(key: LeaseKey, holder: string, token: number, ttlMs: number): Promise<LeaseResult> {
    if (!(token > 0)) throw new LeaseManagerError('renew: fencing token must be positive');
    if (!(ttlMs > 0)) throw new LeaseManagerError('renew: ttl must be positive');
    const current = await this.#store.get(key);
    const decision = decideRenew(current, holder, token, ttlMs, this.#clock.now());
    if (decision.kind === 'refuse') return decision.result;
    try {
      return stateOf(await this.#store.put(decision.record.version, decision.record), true);
    } catch (err) {
      if (!isStoreConflict(err)) throw err;
    }
    // Lost the CAS: report whoever won (#120); if that read fails, the identity we saw, not acquired.
    try {
      const winner = await this.#store.get(key);
      return winner === undefined ? ABSENT : stateOf(winner, false);
    } catch {
      return stateOf(current!, false);
    }
  }

  async release(key: LeaseKey, holder: string, token: number): Promise<void> {
    const current = await this.#store.get(key);
    const decision = decideRelease(current, holder, token, this.#clock.now());
    if (decision.kind === 'done') return;
    if (decision.kind === 'conflict') throw new ReleaseConflictError(key);
    try {
      await this.#store.put(current!.version, decision.record);
    } catch (err) {
      // A lost CAS means someone else wrote after us: our ownership is over either way.
      if (!isStoreConflict(err)) throw err;
    }
  }
}
