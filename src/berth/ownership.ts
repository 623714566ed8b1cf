// Ownership decisions of the reconciler, pure (docs/behaviour.md §2.3, §2.8, §2.9): the local
// ownership deadline, whether a workload activation is still valid, when a stop is forced, the sanity
// check of a central answer, the identity a release uses, and every budget and requeue interval.
// Times are epoch milliseconds; durations milliseconds.
import {
  ACQUIRE_TIMEOUT_MS,
  type BerthLease,
  LeaseState,
  REQUEUE_ON_FAILURE_MS,
  ReconcileError,
  WorkloadPhase,
  workloadActiveAt,
} from './api.ts';
import type { AcquireResult } from './leaseclient.ts';
import { parseTime } from './status.ts';

const SECOND_MS = 1000;

export const isDeleting = (lease: BerthLease): boolean =>
  lease.metadata.deletionTimestamp !== undefined && lease.metadata.deletionTimestamp !== null;

/** The lease's TTL and heartbeat in milliseconds. */
export function leaseTimes(lease: BerthLease): { ttlMs: number; heartbeatMs: number } {
  return {
    ttlMs: lease.spec.ttlSeconds * SECOND_MS,
    heartbeatMs: lease.spec.heartbeatIntervalSeconds * SECOND_MS,
  };
}

/**
 * `reacquireInterval`: the standby's requeue, heartbeat when 0 < heartbeat < ttl/3, else ttl/3
 * (which is min(heartbeat, ttl/3) for a positive heartbeat). Whole milliseconds.
 */
export function reacquireIntervalMs(heartbeatMs: number, ttlMs: number): number {
  const third = Math.floor(ttlMs / 3);
  return heartbeatMs > 0 && heartbeatMs < third ? heartbeatMs : third;
}

/**
 * §2.3 step 11: the local ownership deadline, min(start + ttl, central expiry), truncated down to the
 * whole second. `start` is the instant before the RPC, so the deadline never extends past the TTL
 * measured from the request, whatever the central clock says.
 */
export function ownershipDeadline(startMs: number, ttlMs: number, expiresAtMs: number): number {
  const deadline = Math.min(startMs + ttlMs, expiresAtMs);
  return Math.floor(deadline / SECOND_MS) * SECOND_MS;
}

/** The recorded deadline of the current activation, if any. */
export function activationDeadline(lease: BerthLease): number | undefined {
  return parseTime(lease.status?.workload?.deadline);
}

/**
 * The stop lead that applies to `lease`: `configured` (`--stop-lead`) for a managed lease, 0 for a
 * lease-only one, which has no workload to stop and keeps the original's timing.
 */
export function stopLeadFor(lease: BerthLease, configured: number): number {
  return lease.spec.target === undefined ? 0 : configured;
}

/**
 * `activeAt(now)`: not deleting, a workload record in phase Active with a deadline more than the stop
 * lead ahead and a positive token. Only then may a managed workload run (and its Pods be permitted). The
 * definition is api.ts's `workloadActiveAt`, which the admission webhook uses too.
 */
export function activeAt(lease: BerthLease, now: number, stopLeadMs: number): boolean {
  return workloadActiveAt(lease.status?.workload, isDeleting(lease), now, stopLeadMs);
}

/**
 * When the current activation ends: the recorded deadline minus the stop lead. The stop begins then, so
 * that it is over by the deadline; every budget and requeue of an active workload is capped by it.
 */
export function activationEnd(lease: BerthLease, stopLeadMs: number): number | undefined {
  const deadline = activationDeadline(lease);
  return deadline === undefined ? undefined : deadline - stopLeadMs;
}

/**
 * §2.3 step 4: why `stopAndRelease` must run before anything else, or undefined. Deleting, a stop in
 * progress, or an activation that expired, belongs to another holder identity, or whose spec became
 * invalid.
 */
export function forcedStopReason(
  lease: BerthLease,
  holder: string,
  invalidSpec: string | undefined,
  now: number,
  stopLeadMs: number,
): string | undefined {
  if (isDeleting(lease)) return 'deleting';
  const w = lease.status?.workload;
  if (w?.phase === WorkloadPhase.Stopping) return 'stopping';
  if (w?.phase !== WorkloadPhase.Active) return undefined;
  if (!activeAt(lease, now, stopLeadMs)) return 'activation expired';
  if ((w.holder ?? '') !== holder) return 'holder identity changed';
  if (invalidSpec !== undefined) return 'spec invalid';
  return undefined;
}

/**
 * §2.3 step 8, managed: after a failed Acquire, whether the workload must be stopped: an activation
 * that ended (its deadline less the stop lead passed), or (legacy safeguard) a target without a workload
 * record whose recorded expiry is in the past.
 */
export function stopAfterAcquireError(lease: BerthLease, now: number, stopLeadMs: number): boolean {
  const w = lease.status?.workload;
  if (w?.phase === WorkloadPhase.Active) {
    const end = activationEnd(lease, stopLeadMs);
    return end === undefined || now >= end;
  }
  if (lease.spec.target !== undefined && w === undefined) {
    const expiresAt = parseTime(lease.status?.expiresAt);
    return expiresAt !== undefined && expiresAt < now;
  }
  return false;
}

/**
 * Beyond the original (lease-only): a status that claims `held` past its recorded central expiry is
 * stale; after a failed Acquire it is marked expired rather than left claiming the lease.
 */
export function heldPastExpiry(lease: BerthLease, now: number): boolean {
  const status = lease.status;
  if (status?.leaseState !== LeaseState.Held) return false;
  const expiresAt = parseTime(status.expiresAt);
  return expiresAt !== undefined && now >= expiresAt;
}

/**
 * §2.3 step 9 with a target, improved (issue 7): only a workload that may have run needs the stop
 * cycle; a managed standby that never activated waits quietly like a lease-only one, instead of
 * re-running stopAndRelease (two status writes) every second as the original does.
 */
export function standbyNeedsStop(lease: BerthLease): boolean {
  const w = lease.status?.workload;
  if (w?.phase === WorkloadPhase.Active || w?.phase === WorkloadPhase.Stopping) return true;
  // A legacy record: held with a token but no workload phase.
  return (
    (w === undefined || !w.phase) &&
    lease.status?.leaseState === LeaseState.Held &&
    (lease.status.fencingToken ?? 0) > 0
  );
}

/**
 * §2.3 step 10: the error when a central "acquired" answer cannot be trusted, else undefined. Beyond the
 * original, a token below `highestToken` (the highest this lease was seen with) is refused too: central
 * tokens never decrease per key, so a lower one is a broken answer, and recording it would move the
 * lease's fencing token backwards.
 */
export function checkCentralAnswer(
  res: AcquireResult,
  holder: string,
  now: number,
  highestToken = 0,
): string | undefined {
  if (
    res.fencingToken <= 0 ||
    res.fencingToken < highestToken ||
    res.holder !== holder ||
    res.expiresAt === undefined ||
    res.expiresAt <= now
  )
    return ReconcileError.invalidCentralResponse;
  return undefined;
}

export interface ReleaseIdentity {
  leaseName: string;
  holder: string;
  fencingToken: number;
}

/**
 * §2.4 step 2: the central identity a release uses: the workload record's when present, else the
 * status's currentHolder and fencingToken with spec.leaseName. Release only when the holder is set and
 * the token positive.
 */
export function releaseIdentity(lease: BerthLease): ReleaseIdentity {
  const w = lease.status?.workload;
  if (w !== undefined)
    return { leaseName: w.leaseName ?? '', holder: w.holder ?? '', fencingToken: w.token ?? 0 };
  return {
    leaseName: lease.spec.leaseName,
    holder: lease.status?.currentHolder ?? '',
    fencingToken: lease.status?.fencingToken ?? 0,
  };
}

export const shouldRelease = (id: ReleaseIdentity): boolean => id.holder !== '' && id.fencingToken > 0;

// ---- budgets and requeues (§2.9) ----

/**
 * Central Acquire: min(heartbeat, 2.5 s, time until the activation ends), the end being the deadline
 * less the stop lead (`activationEnd`).
 */
export function acquireBudgetMs(heartbeatMs: number, now: number, activeUntil?: number): number {
  const budget = Math.min(heartbeatMs, ACQUIRE_TIMEOUT_MS);
  return activeUntil === undefined ? budget : Math.max(1, Math.min(budget, activeUntil - now));
}

/** Held: min(heartbeat, time until the deadline less the stop lead), when the activation ends. */
export function heldRequeueMs(
  heartbeatMs: number,
  deadline: number,
  now: number,
  stopLeadMs: number,
): number {
  return Math.max(1, Math.min(heartbeatMs, deadline - stopLeadMs - now));
}

/**
 * Acquire error: min(heartbeat, 1 s), capped by the time left before `cap` (the end of the activation,
 * or a held lease-only lease's expiry) so the stop or the expiry is noticed on time.
 */
export function acquireErrorRequeueMs(heartbeatMs: number, now: number, cap?: number): number {
  const base = Math.min(heartbeatMs, REQUEUE_ON_FAILURE_MS);
  return cap === undefined || cap <= now ? base : Math.max(1, Math.min(base, cap - now));
}
