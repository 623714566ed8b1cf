// The drain of `stopAndRelease` (docs/behaviour.md §2.4 step 1, `drainJobs` and `drainPods`): after
// Stopping is committed and the target stopped, every managed Job is suspended and deleted, and every
// managed Pod — registered ones and any Pod carrying this lease's UID, gated and Pending ones too, since
// an earlier ungate may still be in flight — is deleted with a UID precondition. The drain is done only
// when no managed Job is left and every managed Pod is terminal (Succeeded/Failed) or gone; until then the
// lease keeps its identity, token and finalizer, and the central lease is not released.

import { isConflict } from '../kube/client.ts';
import { type BerthLease, MANAGED_UID } from './api.ts';
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

export interface PodDrainPlan {
  /** The lease's Pods without a deletionTimestamp: deleted now (terminal ones too, to clean up). */
  delete: KubeObj[];
  /** The lease's Pods still running or able to run: not terminal, present. */
  remaining: KubeObj[];
}

/** §2.4 `drainPods`, pure, over one LIST of the namespace's Pods. */
export function planPodDrain(lease: BerthLease, pods: readonly KubeObj[]): PodDrainPlan {
  const ours = pods.filter((p) => isLeasePod(lease, p));
  return {
    delete: ours.filter((p) => !isDeletingObject(p) && uidOf(p) !== ''),
    remaining: ours.filter((p) => !isTerminalPod(p)),
  };
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
  const plan = planPodDrain(lease, pods);
  let deleted = 0;
  for (const pod of plan.delete) {
    const outcome = await api.delete('Pod', namespace, pod.metadata.name, uidOf(pod), session.signal);
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
