// Not in the original: whether a BerthLease's TTL outlasts the operator's own failover. When the
// leading replica crashes, nobody renews its leases until another replica has taken the leader Lease
// (up to its lease duration plus a jittered retry period). The central lease outlives the last renewal
// by the TTL, and that renewal may be up to one heartbeat old at the crash. If the central lease can
// expire first, another cluster may acquire it and start the workload while this cluster's Pods still
// run (a crashed operator stops nothing). The check only warns: the spec is the user's to choose.
import { JITTER_FACTOR } from '../kube/leader-decision.ts';
import type { BerthLeaseSpec } from './api.ts';

/** Longest time a crashed leader leaves leases unrenewed before a standby replica resumes them. */
export function leaderFailoverBoundMs(leaseDurationMs: number, retryPeriodMs: number): number {
  return leaseDurationMs + retryPeriodMs * (1 + JITTER_FACTOR);
}

const seconds = (ms: number): string => `${Math.round(ms / 100) / 10}s`;

/** The Warning's note when `spec` cannot survive a leader failover of `failoverBoundMs`, else undefined. */
export function failoverMarginProblem(spec: BerthLeaseSpec, failoverBoundMs: number): string | undefined {
  const ttlMs = spec.ttlSeconds * 1000;
  const heartbeatMs = spec.heartbeatIntervalSeconds * 1000;
  const margin = ttlMs - heartbeatMs;
  if (failoverBoundMs <= 0 || margin > failoverBoundMs) return undefined;
  return (
    `ttlSeconds ${spec.ttlSeconds} minus heartbeatIntervalSeconds ${spec.heartbeatIntervalSeconds} ` +
    `(${seconds(margin)}) does not outlast an operator leader failover (up to ${seconds(failoverBoundMs)}): ` +
    'if the leading replica crashes, another cluster can acquire the lease while this cluster still runs the workload'
  );
}
