// The drain of `stopAndRelease` (docs/behaviour.md §2.4 step 1, `drainJobs` and `drainPods`): after
// Stopping is committed and the target stopped, every managed Job is suspended and deleted, and every
// managed Pod — registered ones and any Pod carrying this lease's UID, gated and Pending ones too, since
// an earlier ungate may still be in flight — is deleted with a UID precondition. The drain is done only
// when no managed Job is left and every managed Pod is terminal (Succeeded/Failed) or gone; until then the
// lease keeps its identity, token and finalizer, and the central lease is not released.
//
// Not in the original: the DELETE bounds each Pod's termination grace so that it ends POD_KILL_MARGIN_MS
// before the activation's recorded deadline (at least 1 s), whatever the Pod's
// terminationGracePeriodSeconds; a Pod its controller already deleted with a longer grace (the target's
// scale-down races the drain) is deleted again with the bounded one, which Kubernetes lets shorten it.

import { isConflict } from '../kube/client.ts';
import { type BerthLease, MANAGED_UID } from './api.ts';
import { activationDeadline } from './ownership.ts';
import { type LeaseSession, managedSelector } from './permit.ts';
import {
  annotationsOf,
  isDeletingObject,
  isTerminalPod,
  type KubeObj,
  uidOf,
  type WorkloadApi,
} from './workload-io.ts';

/**
 * The Pods of a namespace that belong to the lease: a registered `(name, uid)`, or the annotation
 * `berth.skaphos.io/managed-lease-uid` naming the lease.
 */
export function isLeasePod(lease: BerthLease, pod: KubeObj): boolean {
  const registered = lease.status?.workload?.pods ?? [];
  const uid = uidOf(pod);
  if (registered.some((p) => p.uid === uid && p.name === pod.metadata.name)) return true;
  const leaseUID = lease.metadata.uid ?? '';
  return leaseUID !== '' && annotationsOf(pod)[MANAGED_UID] === leaseUID;
}

/**
 * Kept free before the deadline when a Pod's grace is bounded: the kubelet's time from the end of the
 * grace to the containers gone (it sees the deletion, kills, reports), and some clock drift.
 */
export const POD_KILL_MARGIN_MS = 1_000;
/** Kubernetes' default terminationGracePeriodSeconds. */
const DEFAULT_GRACE_SECONDS = 30;

/**
 * The gracePeriodSeconds of a drain's DELETE: the Pod's own grace, bounded to end POD_KILL_MARGIN_MS
 * before `deadline`: max(1, min(own, floor((deadline − now − margin) / 1 s))). Never 0: a zero grace
 * removes the object at once, before the kubelet stopped anything, and the drain would count the Pod
 * gone while it still runs. Undefined without a deadline (the Pod's own grace applies).
 */
export function podStopGraceSeconds(
  ownSeconds: number | undefined,
  deadline: number | undefined,
  now: number,
): number | undefined {
  if (deadline === undefined) return undefined;
  const fits = Math.floor((deadline - now - POD_KILL_MARGIN_MS) / 1000);
  return Math.max(1, Math.min(ownSeconds ?? DEFAULT_GRACE_SECONDS, fits));
}

const wholeSeconds = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;

/** A Pod's spec.terminationGracePeriodSeconds, when set. */
const ownGraceOf = (pod: KubeObj): number | undefined =>
  wholeSeconds(pod.spec?.terminationGracePeriodSeconds);

/** podStopGraceSeconds for a Pod of `lease`, bounded by its activation's recorded deadline. */
export const leasePodGrace = (lease: BerthLease, pod: KubeObj, now: number): number | undefined =>
  podStopGraceSeconds(ownGraceOf(pod), activationDeadline(lease), now);

/**
 * Whether a Pod already deleting must be deleted again with `grace`: its grace ends after the bound
 * (`deletionTimestamp` is when the grace ends) and `grace` is shorter (Kubernetes only shortens one).
 */
function graceEndsLate(pod: KubeObj, grace: number, deadline: number): boolean {
  const current = wholeSeconds(pod.metadata.deletionGracePeriodSeconds);
  const ends = Date.parse(pod.metadata.deletionTimestamp ?? '');
  return current !== undefined && grace < current && ends > deadline - POD_KILL_MARGIN_MS;
}

/** One DELETE of the drain: the Pod, and its bounded grace (undefined: the Pod's own). */
export interface PodDelete {
  pod: KubeObj;
  graceSeconds: number | undefined;
}

export interface PodDrainPlan {
  /**
   * The lease's Pods without a deletionTimestamp (terminal ones too, to clean up), and those deleting
   * whose grace ends after the bound: deleted now.
   */
  delete: PodDelete[];
  /** The lease's Pods still running or able to run: not terminal, present. */
  remaining: KubeObj[];
}

/**
 * §2.4 `drainPods`, pure, over one LIST of the namespace's Pods at `now`; the graces are bounded by the
 * activation's recorded deadline.
 */
export function planPodDrain(lease: BerthLease, pods: readonly KubeObj[], now: number): PodDrainPlan {
  const ours = pods.filter((p) => isLeasePod(lease, p));
  const deadline = activationDeadline(lease);
  const deletes: PodDelete[] = [];
  for (const pod of ours) {
    if (uidOf(pod) === '') continue;
    const graceSeconds = leasePodGrace(lease, pod, now);
    if (!isDeletingObject(pod)) deletes.push({ pod, graceSeconds });
    else if (
      graceSeconds !== undefined &&
      deadline !== undefined &&
      !isTerminalPod(pod) &&
      graceEndsLate(pod, graceSeconds, deadline)
    )
      deletes.push({ pod, graceSeconds });
  }
  return { delete: deletes, remaining: ours.filter((p) => !isTerminalPod(p)) };
}

export interface DrainProgress {
  done: boolean;
  /** Objects this pass asked to delete. */
  deleted: number;
  /** Objects still in the way (Pods running or terminating, Jobs present). */
  remaining: number;
}

/**
 * §2.4 `drainPods`: one LIST of every Pod in the namespace (a Pod that lost its label is still found by
 * its registration), then a UID-guarded DELETE of each of the lease's Pods not yet deleting.
 */
export async function drainPods(session: LeaseSession, api: WorkloadApi): Promise<DrainProgress> {
  const lease = session.lease;
  const namespace = lease.metadata.namespace ?? '';
  const pods = await api.list('Pod', namespace, undefined, session.signal);
  const plan = planPodDrain(lease, pods, session.now());
  let deleted = 0;
  for (const { pod, graceSeconds } of plan.delete) {
    const outcome = await api.delete(
      'Pod',
      namespace,
      pod.metadata.name,
      uidOf(pod),
      session.signal,
      graceSeconds,
    );
    if (outcome === 'deleted') deleted++;
  }
  const remaining = plan.remaining.length;
  return { done: remaining === 0, deleted, remaining };
}

/** Attempts of one Job suspension when the Job changed between the read and the write (status updates). */
const SUSPEND_ATTEMPTS = 3;

/**
 * Sets `spec.suspend=true` on a Job with a resourceVersion-guarded merge patch (no write when it is
 * suspended), re-reading it after a conflict. Undefined when the Job is gone, replaced or deleting.
 */
export async function suspendJob(
  api: WorkloadApi,
  namespace: string,
  job: KubeObj,
  signal: AbortSignal,
): Promise<KubeObj | undefined> {
  let current: KubeObj | undefined = job;
  for (let attempt = 1; ; attempt++) {
    if (current.spec?.suspend === true) return current;
    try {
      return await api.mergePatch(
        'Job',
        namespace,
        current.metadata.name,
        {
          metadata: { resourceVersion: current.metadata.resourceVersion ?? '', uid: uidOf(current) },
          spec: { suspend: true },
        },
        signal,
      );
    } catch (err) {
      if (!isConflict(err) || attempt >= SUSPEND_ATTEMPTS) throw err;
    }
    current = await api.get('Job', namespace, job.metadata.name, signal);
    if (current === undefined || uidOf(current) !== uidOf(job) || isDeletingObject(current)) return undefined;
  }
}

/**
 * §2.4 `drainJobs`: LIST the Jobs labelled with the lease's UID; suspend (resourceVersion-guarded) and
 * DELETE (UID precondition) each one not already deleting. Done only when the LIST is empty (listed
 * again after deletions).
 */
export async function drainJobs(session: LeaseSession, api: WorkloadApi): Promise<DrainProgress> {
  const lease = session.lease;
  const namespace = lease.metadata.namespace ?? '';
  const jobs = await api.list('Job', namespace, managedSelector(lease), session.signal);
  let deleted = 0;
  for (const job of jobs) {
    if (isDeletingObject(job) || uidOf(job) === '') continue;
    const suspended = await suspendJob(api, namespace, job, session.signal);
    if (suspended === undefined) continue;
    if ((await api.delete('Job', namespace, job.metadata.name, uidOf(job), session.signal)) === 'deleted')
      deleted++;
  }
  // A Job deleted in the background is usually gone at once: look again rather than wait a pass.
  const left = deleted > 0 ? await api.list('Job', namespace, managedSelector(lease), session.signal) : jobs;
  return { done: left.length === 0, deleted, remaining: left.length };
}
