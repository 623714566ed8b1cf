// What changed between two statuses of one BerthLease, pure: the ownership transitions the reconciler
// reports as Events and counts in `berth_lease_transitions_total`. Events are emitted on transitions
// only (not on every heartbeat or every failed retry), so an outage of N leases costs N Events, not N
// per second.
import { type BerthLeaseStatus, ConditionReason, ConditionType } from './api.ts';
import { claimsHeld, findCondition } from './status.ts';

export const LeaseEventReason = {
  Acquired: 'Acquired',
  LeaseLost: 'LeaseLost',
  AcquireFailed: 'AcquireFailed',
  Released: 'Released',
  ReleaseFailed: 'ReleaseFailed',
  // The managed-workload path (managed-workloads.ts).
  /** A new ownership epoch activated the target (acquireAction applied, Pods permitted). */
  Activated: 'Activated',
  /** Stopping committed: the target is stopped and its Pods and Jobs drained before the release. */
  Stopping: 'Stopping',
  /** Every managed Pod is terminal or gone and no managed Job is left. */
  Drained: 'Drained',
  /** Not in the original: the TTL does not outlast an operator leader failover (failover-margin.ts). */
  TTLBelowFailover: 'TTLBelowFailover',
  /** Not in the original: the TTL cannot hold a renewal cycle and the stop lead (failover-margin.ts). */
  TTLBelowStopLead: 'TTLBelowStopLead',
} as const;

/** events.k8s.io/v1 `action` of each Event. */
export const LeaseEventAction = {
  Acquire: 'Acquire',
  Release: 'Release',
  Activate: 'Activate',
  Stop: 'Stop',
  Drain: 'Drain',
} as const;

export type LeaseTransition =
  /** Now held, before not held or held with another token (a new ownership epoch). */
  | { kind: 'acquired'; holder: string; fencingToken: number }
  /** Held before, not now; `detail` is the Acquired condition's message. */
  | { kind: 'lost'; reason: string; detail: string }
  /** HeartbeatHealthy became False/AcquireFailed. */
  | { kind: 'unhealthy'; detail: string };

const unhealthy = (status: BerthLeaseStatus | undefined): boolean => {
  const c = findCondition(status, ConditionType.HeartbeatHealthy);
  return c?.status === 'False' && c.reason === ConditionReason.AcquireFailed;
};

export function transitionsOf(
  before: BerthLeaseStatus | undefined,
  after: BerthLeaseStatus | undefined,
): LeaseTransition[] {
  const out: LeaseTransition[] = [];
  const wasHeld = claimsHeld(before);
  const isHeld = claimsHeld(after);
  if (isHeld && (!wasHeld || before?.fencingToken !== after?.fencingToken)) {
    out.push({
      kind: 'acquired',
      holder: after?.currentHolder ?? '',
      fencingToken: after?.fencingToken ?? 0,
    });
  } else if (wasHeld && !isHeld) {
    const acquired = findCondition(after, ConditionType.Acquired);
    out.push({ kind: 'lost', reason: acquired?.reason ?? '', detail: acquired?.message ?? '' });
  }
  if (unhealthy(after) && !unhealthy(before)) {
    out.push({
      kind: 'unhealthy',
      detail: findCondition(after, ConditionType.HeartbeatHealthy)?.message ?? '',
    });
  }
  return out;
}
