// A lease's target (docs/behaviour.md §2.3 step 6, §2.4 `stopTarget`, §2.6): its verification
// against the admission record, and the target actions — `scale` (spec.replicas of a Deployment,
// StatefulSet or ReplicaSet) and `suspend` (spec.suspend of a CronJob) — written directly to the object
// as a JSON merge patch that names the read `metadata.resourceVersion` and `metadata.uid`, so a write
// based on a stale read fails with 409 instead of overwriting a newer state. Nothing is written when
// nothing changes, so a steady heartbeat issues no target write.
//
// The stop fence: every stop write carries the annotation `berth.skaphos.io/stop-fence` set to the
// BerthLease's resourceVersion at the time of the stop. A stop in `stopWorkload` (phase Stopping
// committed) writes it even when the target is already stopped, which bumps the target's
// resourceVersion, so an activation patch still in flight — read before the stop — loses with 409. It
// is written once per stop: a later pass that finds the same fence and a stopped target writes nothing.
// The pure planning is separate from the I/O so it is unit-tested without a server.
import { isConflict } from '../kube/client.ts';
import { kindOf, type WorkloadKind } from '../workloads/model.ts';
import {
  type BerthLease,
  isCronJobTarget,
  type LeaseAction,
  MANAGED_LEASE,
  MANAGED_UID,
  ReconcileError,
  STOP_FENCE,
  type TargetRef,
} from './api.ts';
import { annotationsOf, type KubeObj, uidOf, type WorkloadApi } from './workload-io.ts';

/** The kind of a (validated) target reference. */
export function targetKind(target: TargetRef): WorkloadKind {
  const kind = kindOf(target.apiVersion, target.kind);
  if (kind === undefined || kind === 'Pod' || kind === 'Job')
    throw new Error(`unsupported target ${target.apiVersion} ${target.kind}`);
  return kind;
}

/** The stop action of a target: scale to 0, or suspend a CronJob (§2.4). */
export function stopAction(target: TargetRef): LeaseAction {
  return isCronJobTarget(target) ? { suspend: true } : { scale: { replicas: 0 } };
}

/**
 * §2.3 step 6, the last check of verifyTarget: the live target is the admitted one (its UID is the
 * recorded targetUID) and carries this lease's binding. The error message, or undefined.
 */
export function targetIdentityError(lease: BerthLease, live: KubeObj): string | undefined {
  const a = annotationsOf(live);
  const ok =
    uidOf(live) !== '' &&
    uidOf(live) === (lease.status?.workload?.targetUID ?? '') &&
    a[MANAGED_UID] === (lease.metadata.uid ?? '') &&
    a[MANAGED_LEASE] === lease.metadata.name;
  return ok ? undefined : ReconcileError.identityMismatch;
}

/**
 * How a stop treats the fence: `always` (stopWorkload, after Stopping is committed) writes it whenever
 * the target does not carry this very fence yet; `with-change` (a standby or an unverified target, where
 * no activation of ours can be in flight) adds it only to a write the spec needs anyway.
 */
export type FenceMode = 'always' | 'with-change';

export interface Fence {
  /** The BerthLease's resourceVersion at the time of the stop. */
  value: string;
  mode: FenceMode;
}

/**
 * §2.6, pure: the merge patch that applies `action` (and the fence) to `target`, or undefined when
 * nothing would change. Throws for an action that sets neither field.
 */
export function planTargetAction(
  target: KubeObj,
  action: LeaseAction,
  fence?: Fence,
): Record<string, unknown> | undefined {
  const spec: Record<string, unknown> = {};
  if (action.suspend !== undefined) {
    if (target.spec?.suspend !== action.suspend) spec.suspend = action.suspend;
  } else if (action.scale !== undefined) {
    // An absent field differs from any value: it converges with exactly one write.
    if (target.spec?.replicas !== action.scale.replicas) spec.replicas = action.scale.replicas;
  } else {
    throw new Error(ReconcileError.emptyAction);
  }
  const specChanges = Object.keys(spec).length > 0;
  const fenceStale = fence !== undefined && annotationsOf(target)[STOP_FENCE] !== fence.value;
  const writeFence = fence !== undefined && fenceStale && (fence.mode === 'always' || specChanges);
  if (!specChanges && !writeFence) return undefined;
  const metadata: Record<string, unknown> = {
    resourceVersion: target.metadata.resourceVersion ?? '',
    uid: uidOf(target),
  };
  if (writeFence) metadata.annotations = { [STOP_FENCE]: fence.value };
  return specChanges ? { metadata, spec } : { metadata };
}

/** Attempts of one target write whose read went stale (409) meanwhile. */
export const TARGET_WRITE_ATTEMPTS = 3;

export type TargetWrite =
  /** The target does not exist: nothing to do (§2.6). */
  | { outcome: 'absent' }
  /** The live object is another one than the admitted target: never touched (§2.4). */
  | { outcome: 'replaced'; uid: string }
  | { outcome: 'unchanged'; target: KubeObj }
  | { outcome: 'written'; target: KubeObj; patch: Record<string, unknown> };

export interface ApplyTargetOptions {
  /** The admitted target's UID; '' or undefined: whatever object has the name. */
  expectedUID?: string;
  /** A different live UID: `error` (activation: `target UID changed`) or `skip` (stops). */
  onReplaced: 'error' | 'skip';
  fence?: Fence;
  signal?: AbortSignal;
}

/**
 * §2.6 `applyFencedAction`: GET the target (NotFound: nothing to do), check its UID, and write the
 * action as a resourceVersion-guarded merge patch when something changes. A 409 (the target changed
 * since the read, usually its controller's status) is retried from a fresh read a few times within the
 * reconcile, every attempt checking the UID and planning again; a stale write never wins.
 */
export async function applyTargetAction(
  api: WorkloadApi,
  lease: BerthLease,
  action: LeaseAction,
  options: ApplyTargetOptions,
): Promise<TargetWrite> {
  const ref = lease.spec.target;
  if (ref === undefined) return { outcome: 'absent' };
  const kind = targetKind(ref);
  const namespace = lease.metadata.namespace ?? '';
  for (let attempt = 1; ; attempt++) {
    const live = await api.get(kind, namespace, ref.name, options.signal);
    if (live === undefined) return { outcome: 'absent' };
    const expected = options.expectedUID ?? '';
    if (expected !== '' && uidOf(live) !== expected) {
      if (options.onReplaced === 'error') throw new Error(ReconcileError.targetUIDChanged);
      return { outcome: 'replaced', uid: uidOf(live) };
    }
    const patch = planTargetAction(live, action, options.fence);
    if (patch === undefined) return { outcome: 'unchanged', target: live };
    try {
      const written = await api.mergePatch(kind, namespace, ref.name, patch, options.signal);
      return { outcome: 'written', target: written, patch };
    } catch (err) {
      // The workload's controller writes its status all the time; re-read and decide again, within
      // this reconcile only (an aborted one never retries, so its stale write just loses).
      if (!isConflict(err) || attempt >= TARGET_WRITE_ATTEMPTS || options.signal?.aborted) throw err;
    }
  }
}

/** A short description of a target for Events: `Deployment "web"`. */
export const describeTarget = (ref: TargetRef): string => `${ref.kind} ${JSON.stringify(ref.name)}`;
