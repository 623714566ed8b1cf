// The timing a soak run keeps, in one place: the install's leader election, the fault lengths, and the
// lease TTL chosen so that what the faults do stays inside what the operator promises
// (docs/behaviour.md §7, docs/performance.md "Soak").
//
// The crash fault kills a leader (and an API fault could depose one, were its renewals to fail past the
// renew deadline; `run` then exits): either way the process is restarted, and nobody renews or stops
// that cluster's leases until the successor has the leader Lease. The operator warns (TTLBelowFailover) of a TTL that does not outlast
// that failover, because the other cluster may then start the workload while this one's Pods still run:
// a double run the operator does not promise to prevent. So the soak's leases are the shortest that pass
// the operator's own check for a failover that also meets one API fault on its way (faults.ts keeps
// the site quiet for as long after each API fault).
import type { BerthLeaseSpec } from '../../src/berth/api.ts';
import { DEFAULT_STOP_LEAD_MS } from '../../src/berth/api.ts';
import {
  failoverMarginProblem,
  leaderFailoverBoundMs,
  stopLeadProblem,
} from '../../src/berth/failover-margin.ts';
import { parseDuration } from '../../src/cli.ts';
import { RUN_FLAGS } from '../../src/config.ts';

const LEASE_DURATION = RUN_FLAGS['leader-election-lease-duration'].default;
const RENEW_DEADLINE = RUN_FLAGS['leader-election-renew-deadline'].default;
const RETRY_PERIOD = RUN_FLAGS['leader-election-retry-period'].default;

/** The install's leader election (the chart leaves it to the flags' defaults), not the tests' short one. */
export const LEADER_ELECTION = [
  `--leader-election-lease-duration=${LEASE_DURATION}`,
  `--leader-election-renew-deadline=${RENEW_DEADLINE}`,
  `--leader-election-retry-period=${RETRY_PERIOD}`,
];

/** The longest a crashed or deposed leader leaves its leases unrenewed under that leader election. */
export const FAILOVER_BOUND_MS = leaderFailoverBoundMs(
  parseDuration(LEASE_DURATION),
  parseDuration(RETRY_PERIOD),
);

/** An API fault lasts 2 s up to this, and the cluster stays quiet as long after it. */
export const API_FAULT_MAX_MS = 6_000;

/**
 * A slow API fault delays each request by up to this: a leader's renewal (a GET and an UPDATE of its
 * Lease, the first a retry period after the last success) then still lands within the renew deadline,
 * so API faults alone do not depose the leader, and the operator processes live long enough for their
 * memory to be judged. Leadership changes come from the crash fault.
 */
export const API_SLOW_MAX_MS = (parseDuration(RENEW_DEADLINE) - parseDuration(RETRY_PERIOD)) / 2;

/** Crashes happen in the first part of a run only, so that each operator's last process lives through the judged half. */
export const CRASH_WINDOW = 0.25;

const HEARTBEAT_SECONDS = 2;

/** The shortest TTL, with a 2 s heartbeat, that the operator takes without a timing Warning for that failover. */
function shortestLease(failoverMs: number): Pick<BerthLeaseSpec, 'ttlSeconds' | 'heartbeatIntervalSeconds'> {
  for (let ttlSeconds = HEARTBEAT_SECONDS + 1; ; ttlSeconds++) {
    const spec: BerthLeaseSpec = {
      leaseName: 'timing',
      holderIdentity: 'timing',
      semantics: 'at-most-once',
      ttlSeconds,
      heartbeatIntervalSeconds: HEARTBEAT_SECONDS,
    };
    const problems = [
      failoverMarginProblem(spec, failoverMs, DEFAULT_STOP_LEAD_MS),
      stopLeadProblem(spec, DEFAULT_STOP_LEAD_MS),
    ];
    if (problems.every((p) => p === undefined))
      return { ttlSeconds, heartbeatIntervalSeconds: HEARTBEAT_SECONDS };
  }
}

/** Short leases, so that central faults outlast them and failovers between the clusters happen in a run. */
export const LEASE_TIMES = shortestLease(FAILOVER_BOUND_MS + API_FAULT_MAX_MS);

/** A central fault lasts 2 s up to this: beyond the TTL, the holder stops and the other cluster takes over. */
export const CENTRAL_FAULT_MAX_MS = LEASE_TIMES.ttlSeconds * 1000 + 10_000;
