// The pure core of leader election (client-go's tryAcquireOrRenew without the I/O): the timings and
// their checks, the LeaderElectionRecord as a Lease stores it, the observation that makes expiry
// skew-safe (a candidate judges a record by when *it* saw it change, on its own clock, never by the
// remote timestamps), and the decision to create, renew, take over or wait. No clock, no API: the
// elector (leader.ts) reads and writes the Lease and hands these functions the local time.
import type { V1Lease, V1LeaseSpec, V1MicroTime } from '@kubernetes/client-node';
import { formatMicroTime } from './microtime.ts';

// Defaults (Kubernetes component-base / controller-runtime).
export const DEFAULT_LEASE_DURATION_MS = 15_000;
export const DEFAULT_RENEW_DEADLINE_MS = 10_000;
export const DEFAULT_RETRY_PERIOD_MS = 2_000;
/** client-go's JitterFactor: a candidate waits retryPeriod * (1 + rand * 1.2) between attempts. */
export const JITTER_FACTOR = 1.2;

export interface LeaderTimings {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/** client-go's NewLeaderElector checks; returns the first problem, or undefined when valid. */
export function validateLeaderTimings(t: LeaderTimings): string | undefined {
  if (!(t.retryPeriodMs > 0)) return 'retry period must be greater than zero';
  if (!(t.renewDeadlineMs > 0)) return 'renew deadline must be greater than zero';
  if (!(t.leaseDurationMs > t.renewDeadlineMs))
    return 'lease duration must be greater than the renew deadline';
  if (!(t.renewDeadlineMs > JITTER_FACTOR * t.retryPeriodMs)) {
    return `renew deadline must be greater than retry period * ${JITTER_FACTOR}`;
  }
  return undefined;
}

/** client-go's LeaderElectionRecord, as stored in a Lease's spec. Times are MicroTime strings. */
export interface LeaderElectionRecord {
  /** Empty when nobody holds the Lease (after a release). */
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: string | undefined;
  renewTime: string | undefined;
  leaseTransitions: number;
}

/** Whole seconds stored in the Lease; rounded up so no candidate ever waits less than configured. */
export function leaseDurationSeconds(leaseDurationMs: number): number {
  return Math.max(1, Math.ceil(leaseDurationMs / 1000));
}

export function recordFromLease(lease: V1Lease): LeaderElectionRecord {
  const spec = lease.spec ?? {};
  return {
    holderIdentity: spec.holderIdentity ?? '',
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    // Read back they are strings (client-node has no V1MicroTime deserializer); keep them verbatim.
    acquireTime: timeText(spec.acquireTime),
    renewTime: timeText(spec.renewTime),
    leaseTransitions: spec.leaseTransitions ?? 0,
  };
}

function timeText(value: V1MicroTime | string | undefined): string | undefined {
  if (value === undefined || value === null) return undefined;
  return typeof value === 'string' ? value : value.toISOString();
}

// client-node's serializer passes V1MicroTime values through untouched (it has no mapping for the type),
// so a correctly formatted string is exactly what goes on the wire.
const wireMicroTime = (text: string | undefined): V1MicroTime | undefined =>
  text === undefined ? undefined : (text as unknown as V1MicroTime);

export function leaseSpecFromRecord(record: LeaderElectionRecord): V1LeaseSpec {
  return {
    holderIdentity: record.holderIdentity,
    leaseDurationSeconds: record.leaseDurationSeconds,
    acquireTime: wireMicroTime(record.acquireTime),
    renewTime: wireMicroTime(record.renewTime),
    leaseTransitions: record.leaseTransitions,
  };
}

export function sameRecord(a: LeaderElectionRecord, b: LeaderElectionRecord): boolean {
  return (
    a.holderIdentity === b.holderIdentity &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.acquireTime === b.acquireTime &&
    a.renewTime === b.renewTime &&
    a.leaseTransitions === b.leaseTransitions
  );
}

/** The record as last seen, and the *local* time it was last seen to change. */
export interface Observation {
  record: LeaderElectionRecord;
  observedAt: number;
}

/**
 * Folds a freshly read record into the observation: the clock only restarts when the record changed.
 * Remote timestamps are never compared with the local clock, which is what makes expiry skew-safe.
 */
export function observe(
  prev: Observation | undefined,
  record: LeaderElectionRecord,
  now: number,
): Observation {
  if (prev !== undefined && sameRecord(prev.record, record)) return prev;
  return { record, observedAt: now };
}

/** Local time at which the observed record expires for a candidate that sees no further change. */
export function expiresAt(observation: Observation): number {
  return observation.observedAt + observation.record.leaseDurationSeconds * 1000;
}

export function isLeaseValid(observation: Observation, now: number): boolean {
  return expiresAt(observation) > now;
}

export type LeaderDecision =
  /** No Lease yet: create it holding it. */
  | { action: 'create'; record: LeaderElectionRecord }
  /** We are the holder: write a renewed record (keeps acquireTime and leaseTransitions). */
  | { action: 'renew'; record: LeaderElectionRecord }
  /** Released or expired: take it over (leaseTransitions + 1). */
  | { action: 'acquire'; record: LeaderElectionRecord }
  /** Held by someone else whose record has not expired yet. */
  | { action: 'wait'; holder: string; expiresAt: number };

export interface DecideOptions {
  leaseDurationMs: number;
}

/**
 * client-go's tryAcquireOrRenew as a pure function of the last observation (undefined: the Lease does
 * not exist), the local clock and our identity.
 */
export function decideLeader(
  observation: undefined,
  now: number,
  identity: string,
  opts: DecideOptions,
): Extract<LeaderDecision, { action: 'create' }>;
export function decideLeader(
  observation: Observation | undefined,
  now: number,
  identity: string,
  opts: DecideOptions,
): LeaderDecision;
export function decideLeader(
  observation: Observation | undefined,
  now: number,
  identity: string,
  opts: DecideOptions,
): LeaderDecision {
  const stamp = formatMicroTime(now);
  const fresh: LeaderElectionRecord = {
    holderIdentity: identity,
    leaseDurationSeconds: leaseDurationSeconds(opts.leaseDurationMs),
    acquireTime: stamp,
    renewTime: stamp,
    leaseTransitions: 0,
  };
  if (observation === undefined) return { action: 'create', record: fresh };
  const old = observation.record;
  if (old.holderIdentity === identity) {
    return {
      action: 'renew',
      record: { ...fresh, acquireTime: old.acquireTime ?? stamp, leaseTransitions: old.leaseTransitions },
    };
  }
  if (old.holderIdentity !== '' && isLeaseValid(observation, now)) {
    return { action: 'wait', holder: old.holderIdentity, expiresAt: expiresAt(observation) };
  }
  return { action: 'acquire', record: { ...fresh, leaseTransitions: old.leaseTransitions + 1 } };
}

/** What client-go writes on release: no holder, a one-second lease, the transitions kept. */
export function releasedRecord(old: LeaderElectionRecord, now: number): LeaderElectionRecord {
  const stamp = formatMicroTime(now);
  return {
    holderIdentity: '',
    leaseDurationSeconds: 1,
    acquireTime: stamp,
    renewTime: stamp,
    leaseTransitions: old.leaseTransitions,
  };
}

/** The leader must step down once this instant passes without a successful renewal. */
export function renewDeadlineAt(lastRenewSentAt: number, renewDeadlineMs: number): number {
  return lastRenewSentAt + renewDeadlineMs;
}

/** How long a candidate sleeps before its next attempt: the jittered retry period, or until expiry. */
export function nextAttemptDelay(
  decision: LeaderDecision | undefined,
  now: number,
  retryPeriodMs: number,
  random: number,
  jitterFactor = JITTER_FACTOR,
): number {
  const jittered = retryPeriodMs * (1 + random * jitterFactor);
  if (decision?.action !== 'wait') return jittered;
  // +1 ms: expiry is strict (observedAt + duration must be *before* now).
  return Math.max(1, Math.min(jittered, decision.expiresAt - now + 1));
}
