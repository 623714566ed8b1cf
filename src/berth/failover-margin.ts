// Not in the original: whether a BerthLease's TTL fits the operator's own timing. Two checks, each
// only a Warning (the spec is the user's to choose):
// - the stop lead (`--stop-lead`): a managed activation ends that long before its deadline, and the
//   deadline is measured from the renewal's request, whose answer may take up to the acquire bound. The
//   next renewal is due a heartbeat after that answer; if heartbeat + acquire bound + lead reach the TTL,
//   the activation can end before the renewal that would extend it, and the workload stops.
// - the leader failover: when the leading replica crashes, nobody renews its leases (or stops their
//   workloads) until another replica has taken the leader Lease (up to its lease duration plus a
//   jittered retry period). The successor must find the activation still running, or begin the stop at
//   least the lead before the deadline; the last renewal may be a heartbeat plus the acquire bound old.
//   If not, another cluster may acquire the lease and start the workload while this cluster's Pods
//   still run (a crashed operator stops nothing).
import { JITTER_FACTOR } from '../kube/leader-decision.ts';
import type { BerthLeaseSpec } from './api.ts';
import { acquireBudgetMs } from './ownership.ts';

/** Longest time a crashed leader leaves leases unrenewed before a standby replica resumes them. */
export function leaderFailoverBoundMs(leaseDurationMs: number, retryPeriodMs: number): number {
  return leaseDurationMs + retryPeriodMs * (1 + JITTER_FACTOR);
}

const seconds = (ms: number): string => `${Math.round(ms / 100) / 10}s`;

/** The spec's TTL and heartbeat, and the bound of one renewal (min(heartbeat, 2.5 s)), in ms. */
function timings(spec: BerthLeaseSpec): { ttlMs: number; heartbeatMs: number; acquireMs: number } {
  const heartbeatMs = spec.heartbeatIntervalSeconds * 1000;
  return { ttlMs: spec.ttlSeconds * 1000, heartbeatMs, acquireMs: acquireBudgetMs(heartbeatMs, 0) };
}

/**
 * The Warning's note when `spec` cannot hold a renewal cycle and a stop lead of `stopLeadMs`
 * (heartbeat + acquire bound + lead ≥ TTL), else undefined.
 */
export function stopLeadProblem(spec: BerthLeaseSpec, stopLeadMs: number): string | undefined {
  const { ttlMs, heartbeatMs, acquireMs } = timings(spec);
  if (heartbeatMs + acquireMs + stopLeadMs < ttlMs) return undefined;
  return (
    `ttlSeconds ${spec.ttlSeconds} does not hold heartbeatIntervalSeconds ${spec.heartbeatIntervalSeconds} ` +
    `plus a renewal (up to ${seconds(acquireMs)}) plus the operator's stop lead (${seconds(stopLeadMs)}): ` +
    'the workload stops before each renewal can extend it'
  );
}

/**
 * The Warning's note when `spec` cannot survive a leader failover of `failoverBoundMs` with a stop lead
 * of `stopLeadMs`: unless ttl − heartbeat > failover + acquire bound + lead. Else undefined.
 */
export function failoverMarginProblem(
  spec: BerthLeaseSpec,
  failoverBoundMs: number,
  stopLeadMs: number,
): string | undefined {
  const { ttlMs, heartbeatMs, acquireMs } = timings(spec);
  const margin = ttlMs - heartbeatMs;
  const needed = failoverBoundMs + acquireMs + stopLeadMs;
  if (failoverBoundMs <= 0 || margin > needed) return undefined;
  return (
    `ttlSeconds ${spec.ttlSeconds} minus heartbeatIntervalSeconds ${spec.heartbeatIntervalSeconds} ` +
    `(${seconds(margin)}) does not outlast an operator leader failover (up to ${seconds(failoverBoundMs)}) ` +
    `plus a renewal (up to ${seconds(acquireMs)}) and the stop lead (${seconds(stopLeadMs)}): ` +
    'if the leading replica crashes, another cluster can acquire the lease while this cluster still runs the workload'
  );
}
