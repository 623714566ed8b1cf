// What the BerthLease reconciler tells the outside about a lease: Events on ownership transitions and
// releases, and the berth_lease_* metrics (held, heartbeat health and holder per lease, transitions,
// refused lower fencing tokens, acquire latency). Reporting never
// fails a reconcile: a recorder that rejects is ignored.
import type { Registry } from 'prom-client';
import type { Referenceable } from '../kube/events.ts';
import { type BerthLease, type BerthLeaseStatus, ConditionType } from './api.ts';
import { type AcquireOutcome, type BerthLeaseMetrics, berthLeaseMetrics } from './metrics.ts';
import { claimsHeld, findCondition } from './status.ts';
import { LeaseEventAction, LeaseEventReason, type LeaseTransition, transitionsOf } from './transitions.ts';

/** An EventRecorder, or a fake. Must never throw or reject. */
export interface LeaseEventRecorder {
  normal(regarding: Referenceable, reason: string, action: string, note?: string): Promise<void>;
  warning(regarding: Referenceable, reason: string, action: string, note?: string): Promise<void>;
}

/** The `state` label values of berth_lease_transitions_total. */
const TRANSITION_STATES = ['held', 'waiting', 'released'] as const;

export class LeaseReporter {
  readonly #recorder: LeaseEventRecorder | undefined;
  readonly #metrics: BerthLeaseMetrics | undefined;

  constructor(recorder: LeaseEventRecorder | undefined, registry: Registry | undefined) {
    this.#recorder = recorder;
    this.#metrics = registry === undefined ? undefined : berthLeaseMetrics(registry);
  }

  /** A status write landed: the held gauge, and the Events and transition counts it implies. */
  written(before: BerthLeaseStatus | undefined, after: BerthLease): void {
    this.setHeld(after);
    const { namespace = '', name } = after.metadata;
    for (const t of transitionsOf(before, after.status)) {
      this.#report(after, t);
      if (t.kind === 'acquired') this.#metrics?.transitions.inc({ namespace, name, state: 'held' });
      if (t.kind === 'lost') this.#metrics?.transitions.inc({ namespace, name, state: 'waiting' });
    }
  }

  /** The central lease was released (or found not ours any more). */
  released(lease: BerthLease): void {
    const { namespace = '', name } = lease.metadata;
    this.#metrics?.transitions.inc({ namespace, name, state: 'released' });
  }

  observeAcquire(outcome: AcquireOutcome, started: number): void {
    this.#metrics?.acquireDuration.observe({ outcome }, (performance.now() - started) / 1000);
  }

  /** The per-lease gauges from the lease's status: held, heartbeat health, holder named. */
  setHeld(lease: BerthLease): void {
    const metrics = this.#metrics;
    if (metrics === undefined) return;
    const { namespace = '', name } = lease.metadata;
    const labels = { namespace, name };
    metrics.held.set(labels, claimsHeld(lease.status) ? 1 : 0);
    metrics.holderPresent.set(labels, (lease.status?.currentHolder ?? '') === '' ? 0 : 1);
    // Exported from 0, so the first anomaly is an increase the alert sees.
    metrics.fencingAnomalies.inc(labels, 0);
    const heartbeat = findCondition(lease.status, ConditionType.HeartbeatHealthy)?.status;
    if (heartbeat === 'True') metrics.heartbeatHealthy.set(labels, 1);
    else if (heartbeat === 'False') metrics.heartbeatHealthy.set(labels, 0);
    else metrics.heartbeatHealthy.remove(labels);
  }

  /** A central "acquired" answer was refused: its fencing token is below the highest seen. */
  fencingAnomaly(lease: BerthLease): void {
    const { namespace = '', name } = lease.metadata;
    this.#metrics?.fencingAnomalies.inc({ namespace, name });
  }

  /**
   * The lease is gone (or was never ours to track): all its series go, its transition counts too. Kept,
   * the series of every lease ever deleted stayed in the registry, without bound under churn (issue 32).
   */
  forget(namespace: string, name: string): void {
    const labels = { namespace, name };
    this.#metrics?.held.remove(labels);
    this.#metrics?.heartbeatHealthy.remove(labels);
    this.#metrics?.holderPresent.remove(labels);
    this.#metrics?.fencingAnomalies.remove(labels);
    for (const state of TRANSITION_STATES) this.#metrics?.transitions.remove({ ...labels, state });
  }

  /** This replica stopped reconciling: it no longer knows who holds what. */
  reset(): void {
    this.#metrics?.held.reset();
    this.#metrics?.heartbeatHealthy.reset();
    this.#metrics?.holderPresent.reset();
  }

  event(lease: BerthLease, type: 'normal' | 'warning', reason: string, action: string, note: string): void {
    const regarding: Referenceable = {
      apiVersion: lease.apiVersion,
      kind: lease.kind,
      name: lease.metadata.name,
      namespace: lease.metadata.namespace,
      uid: lease.metadata.uid,
    };
    const recorder = this.#recorder;
    if (recorder === undefined) return;
    // Recorders must not reject; should one do so anyway, it is not the reconcile's failure.
    recorder[type](regarding, reason, action, note).catch(() => {});
  }

  #report(lease: BerthLease, t: LeaseTransition): void {
    const leaseName = JSON.stringify(lease.spec.leaseName);
    switch (t.kind) {
      case 'acquired':
        this.event(
          lease,
          'normal',
          LeaseEventReason.Acquired,
          LeaseEventAction.Acquire,
          `acquired lease ${leaseName} as ${JSON.stringify(t.holder)} with fencing token ${t.fencingToken}`,
        );
        return;
      case 'lost':
        this.event(lease, 'warning', LeaseEventReason.LeaseLost, LeaseEventAction.Acquire, t.detail);
        return;
      case 'unhealthy':
        this.event(lease, 'warning', LeaseEventReason.AcquireFailed, LeaseEventAction.Acquire, t.detail);
        return;
    }
  }
}
