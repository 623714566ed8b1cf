// The BerthLease controller's own metrics (the original has none): whether this cluster holds each
// lease, whether its heartbeat is healthy and whether its status names any holder, how long central
// Acquire calls take, ownership transitions, and central answers refused for a fencing token that went
// backwards.
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { getOrCreateCounter, getOrCreateGauge, getOrCreateHistogram } from '../observability/metrics.ts';

export type AcquireOutcome = 'acquired' | 'held-by-other' | 'error';
export type TransitionState = 'held' | 'waiting' | 'released';

export interface BerthLeaseMetrics {
  /** 1 while this cluster's status claims the lease, else 0; removed with the BerthLease. */
  held: Gauge<'namespace' | 'name'>;
  /** 1 while the HeartbeatHealthy condition is True, 0 while False; absent without it; removed with the BerthLease. */
  heartbeatHealthy: Gauge<'namespace' | 'name'>;
  /** 1 while the status names a current holder (this cluster or another), else 0; removed with the BerthLease. */
  holderPresent: Gauge<'namespace' | 'name'>;
  /** Central "acquired" answers refused because their token is below the highest this lease was seen with. */
  fencingAnomalies: Counter<'namespace' | 'name'>;
  acquireDuration: Histogram<'outcome'>;
  transitions: Counter<'namespace' | 'name' | 'state'>;
}

/** Central calls are bounded at 2.5 s; buckets from 5 ms up to that bound and the client default. */
export const ACQUIRE_DURATION_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

export function berthLeaseMetrics(registry: Registry): BerthLeaseMetrics {
  return {
    held: getOrCreateGauge(registry, {
      name: 'berth_lease_held',
      help: 'Whether this cluster holds the BerthLease at the central Berth lease API (1) or not (0).',
      labelNames: ['namespace', 'name'],
    }),
    heartbeatHealthy: getOrCreateGauge(registry, {
      name: 'berth_lease_heartbeat_healthy',
      help: "Whether the BerthLease's HeartbeatHealthy condition is True (1) or False (0).",
      labelNames: ['namespace', 'name'],
    }),
    holderPresent: getOrCreateGauge(registry, {
      name: 'berth_lease_holder_present',
      help: 'Whether the BerthLease status names a current holder, this cluster or another (1), or none (0).',
      labelNames: ['namespace', 'name'],
    }),
    fencingAnomalies: getOrCreateCounter(registry, {
      name: 'berth_lease_fencing_anomalies_total',
      help: 'Central Acquire answers refused because their fencing token is below the highest this BerthLease was seen with.',
      labelNames: ['namespace', 'name'],
    }),
    acquireDuration: getOrCreateHistogram(registry, {
      name: 'berth_lease_acquire_duration_seconds',
      help: 'Duration of central Acquire calls by outcome (acquired, held-by-other, error).',
      labelNames: ['outcome'],
      buckets: [...ACQUIRE_DURATION_BUCKETS],
    }),
    transitions: getOrCreateCounter(registry, {
      name: 'berth_lease_transitions_total',
      help: 'Ownership transitions of BerthLeases in this cluster, by the state entered (held, waiting, released).',
      labelNames: ['namespace', 'name', 'state'],
    }),
  };
}

export interface ManagedWorkloadMetrics {
  /** Pod UIDs registered in each lease's status.workload.pods; removed with the BerthLease. */
  registeredPods: Gauge<'namespace' | 'name'>;
  /** From a managed Pod's creation to the removal of its scheduling gate. */
  gateRemoval: Histogram;
  /** From the decision to stop a managed workload (Stopping committed) to every Pod and Job drained. */
  stopDuration: Histogram;
}

/** Gate removal: tens of milliseconds when healthy, up to a heartbeat or more after a central outage. */
export const GATE_REMOVAL_BUCKETS: readonly number[] = [
  0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];
/** Stops: bounded below by the Pods' termination grace (default 30 s). */
export const WORKLOAD_STOP_BUCKETS: readonly number[] = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export function managedWorkloadMetrics(registry: Registry): ManagedWorkloadMetrics {
  return {
    registeredPods: getOrCreateGauge(registry, {
      name: 'berth_managed_pods_registered',
      help: 'Managed Pod UIDs registered in the BerthLease status (status.workload.pods) of each lease.',
      labelNames: ['namespace', 'name'],
    }),
    gateRemoval: getOrCreateHistogram(registry, {
      name: 'berth_pod_gate_removal_seconds',
      help: 'Time from the creation of a managed Pod to the removal of its Berth scheduling gate.',
      buckets: [...GATE_REMOVAL_BUCKETS],
    }),
    stopDuration: getOrCreateHistogram(registry, {
      name: 'berth_workload_stop_seconds',
      help: 'Time from the stop of a managed workload (phase Stopping committed) to all its Pods and Jobs drained.',
      buckets: [...WORKLOAD_STOP_BUCKETS],
    }),
  };
}
