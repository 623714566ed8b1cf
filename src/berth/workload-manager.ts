// The extension point of the managed-workload path (docs/behaviour.md §2.3 steps 6, 12 and 14,
// §2.4 step 1, §2.6, §2.7). The reconciler owns the lease side — finalizer, validation, forced-stop
// decisions, the central Acquire and Release, the workload record's identity (phase, holder, token,
// deadline) and every status condition of the lease — and calls a WorkloadManager for what touches
// the target, its Jobs and its Pods. Only leases with `spec.target` reach these hooks.
//
// Activation and pruning (steps 12 and 14) come with a successful verification (`TargetVerdict.target`):
// a manager that cannot verify a target has nothing to activate, and need not pretend it could.
//
// `leaseOnlyWorkloads()` is the implementation of an operator without workload admission: every target
// fails verification with the exact messages of §2.3 step 6, so nothing is ever activated, and there
// is nothing to stop.
import type { Logger } from '../observability/logger.ts';
import { type BerthLease, type BerthLeaseStatus, type PermittedPod, ReconcileError } from './api.ts';
import type { StatusStamp } from './status.ts';

/** One reconcile of one BerthLease, as the workload hooks see it. */
export interface LeaseRun {
  /** The latest copy of the object (replaced by every write of this reconcile). */
  readonly lease: BerthLease;
  /** The central holder identity of this operator for the lease (§2.2). */
  readonly holder: string;
  /** Aborted when the reconcile's 5 s bound passes. */
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** The reconciler's clock. */
  now(): number;
  /** `--stop-lead`: the activation ends this long before its recorded deadline (`activeAt`). */
  readonly stopLeadMs: number;
  /** `now()` and the object's generation, for the status builders of status.ts. */
  stamp(): StatusStamp;
  /**
   * Replaces the status (resourceVersion-guarded; a stale copy fails with 409 and the error should be
   * returned), skipping the write when nothing changed. Updates `lease`.
   */
  writeStatus(status: BerthLeaseStatus): Promise<BerthLease>;
}

/** What a verified target lets the reconcile do once ownership is recorded. */
export interface VerifiedTarget {
  /**
   * Before a new activation (the workload is not Active yet), once the central lease is held: why it must
   * not start after all, or undefined. A live read, where verification could answer from a cache (the
   * opt-in admission scope). Errors are returned by the reconcile, and nothing is activated.
   */
  confirmActivation(run: LeaseRun): Promise<string | undefined>;
  /** §2.3 step 12 (`pruneCompleted`): the registered Pods that still exist as non-terminal Pods. */
  pruneCompleted(run: LeaseRun, pods: readonly PermittedPod[]): Promise<PermittedPod[]>;
  /**
   * §2.3 step 14: ownership (phase Active, holder, token, deadline) is persisted; apply acquireAction
   * to the target (its UID checked) and permit the registered Pods.
   */
  activate(run: LeaseRun): Promise<void>;
}

export type TargetVerdict =
  | { ok: true; target: VerifiedTarget }
  | {
      ok: false;
      /** The `Acquired=False/AdmissionRequired` message (one of ReconcileError's, or the GET error). */
      message: string;
      /** Reconcile again after this long; undefined waits for the next change of the object. */
      retryAfterMs: number | undefined;
      /** The target could not be read (API error, not NotFound): nothing definite is known about it. */
      transient?: boolean;
    };

/** How far a stop got: `pending` until every managed Pod is terminal or gone (requeue after 1 s). */
export type StopProgress = 'done' | 'pending';

export interface WorkloadManager {
  /**
   * §2.3 step 6 (`verifyTarget`): the lease is outside the operator namespace, workload admission is
   * on, the workload record has the target's admitted UID, and the live target matches it. Only a
   * verified target can be pruned and activated (steps 12 and 14).
   */
  verifyTarget(run: LeaseRun): Promise<TargetVerdict>;
  /**
   * §2.3 step 6 on a failed verification while not Active, and §2.3 step 9 for a managed standby that
   * never activated: keep the target stopped (never activate it; it may be a legacy one), writing only
   * when it is not stopped yet. Errors are returned by the reconcile.
   */
  stopTarget(run: LeaseRun): Promise<void>;
  /**
   * §2.4 step 1: commit phase Stopping (`stoppingStatus`, via `run.writeStatus`), stop the target with
   * the stop fence, suspend and delete managed Jobs, delete managed Pods. The reconciler releases the
   * central lease only after `done`, and keeps identity, token and finalizer otherwise.
   */
  stopWorkload(run: LeaseRun): Promise<StopProgress>;
  /**
   * Optional: runs one reconcile of `key` (`namespace/name`) exclusively with the manager's own work on
   * the same lease (e.g. Pod registrations made outside reconciles), so they do not race each other's
   * status writes. Waiting ends with `signal`.
   */
  exclusive?<T>(key: string, work: () => Promise<T>, signal: AbortSignal): Promise<T>;
}

/**
 * The WorkloadManager of a lease-only operator: a target is never verified (operator namespace first,
 * then "admission required"), so neither activation nor a stop can ever be needed. A lease that was
 * activated by a managed operator before a restart in lease-only mode cannot be drained here; that is
 * logged and its central lease released as usual.
 */
export function leaseOnlyWorkloads(operatorNamespace: string): WorkloadManager {
  return {
    async verifyTarget(run) {
      const message =
        run.lease.metadata.namespace === operatorNamespace
          ? ReconcileError.operatorNamespace
          : ReconcileError.admissionDisabled;
      // Nothing but a restart with other flags changes the verdict: wait for the next object change.
      return { ok: false, message, retryAfterMs: undefined };
    },
    async stopTarget() {},
    async stopWorkload(run) {
      if (run.lease.status?.workload?.phase) {
        run.log.warn(
          { phase: run.lease.status.workload.phase },
          'managed workload record found but workload admission is disabled: its Pods are not drained by this operator',
        );
      }
      return 'done';
    },
  };
}
