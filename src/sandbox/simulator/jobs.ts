// The Job controller (pkg/controller/job) and the TTL-after-finished controller: Pods `<job>-<random>`
// from the template (the API server already added the job-name / controller-uid labels) with a controller
// ownerReference; up to min(parallelism, completions - succeeded) active Pods; Succeeded and Failed Pods
// counted once each into status.succeeded / status.failed; SuccessCriteriaMet then Complete (once no Pod
// is active or terminating) with completionTime; FailureTarget then Failed for backoffLimit
// (BackoffLimitExceeded) and activeDeadlineSeconds (DeadlineExceeded); `spec.suspend` deletes the active
// Pods and sets Suspended (resuming resets startTime); status.active / ready / terminating;
// podReplacementPolicy Failed waits for terminating Pods before replacing them; a finished Job with
// ttlSecondsAfterFinished is deleted (foreground) when its TTL has passed.
// Not simulated: Indexed completion mode (treated as NonIndexed), podFailurePolicy, successPolicy,
// backoffLimitPerIndex, the pod-failure backoff delay, the job-tracking finalizer (terminal Pods are
// counted in memory by UID instead), managedBy.
import { rfc3339 } from '../objects.ts';
import type { Change } from '../store.ts';
import type { KubeObject } from '../types.ts';
import {
  type Condition,
  conditionsOf,
  conditionTrue,
  controllerUser,
  deletionOrder,
  findCondition,
  isNotFound,
  isPodActive,
  isPodReady,
  isPodTerminal,
  isTerminating,
  keyOf,
  nameOf,
  namespaceOf,
  newControllerRef,
  num,
  obj,
  omitEmpty,
  parseTime,
  podFromTemplate,
  podNamePrefix,
  podPhase,
  requestContext,
  setCondition,
  splitKey,
  str,
} from './common.ts';
import {
  allKeys,
  getObject,
  ownerKeys,
  type SimContext,
  type SimController,
  TYPE_KEYS,
  writeStatus,
} from './context.ts';
import { ownedPods } from './replicasets.ts';

const USER = controllerUser('job-controller');
const TTL_USER = controllerUser('ttl-after-finished-controller');
const ctxFor = () => requestContext(USER, 'kube-controller-manager');

export interface JobPlan {
  create: number;
  delete: KubeObject[];
  status: Record<string, unknown>;
  /** UIDs of terminal Pods that `status` counts for the first time. */
  counted: string[];
  /** The Job's TTL after finishing has passed: delete it. */
  expired: boolean;
  requeueAfterMs?: number;
}

/** 'Complete' or 'Failed' when the Job has finished. */
export function jobFinished(job: KubeObject): 'Complete' | 'Failed' | undefined {
  const conditions = conditionsOf(job.status);
  if (conditionTrue(conditions, 'Complete')) return 'Complete';
  if (conditionTrue(conditions, 'Failed')) return 'Failed';
  return undefined;
}

/** syncJob: actions and status for one Job, given its Pods and the terminal Pods already counted. */
export function planJob(
  job: KubeObject,
  pods: KubeObject[],
  counted: ReadonlySet<string>,
  now: number,
): JobPlan {
  const spec = obj(job.spec);
  const st = obj(job.status);
  const nowIso = rfc3339(now);
  const parallelism = num(spec.parallelism, 1);
  const completions = typeof spec.completions === 'number' ? spec.completions : undefined;
  const backoffLimit = num(spec.backoffLimit, 6);
  const active = pods.filter(isPodActive);
  const terminating = pods.filter((p) => isTerminating(p) && !isPodTerminal(p));
  const fresh = (phase: string) =>
    pods.filter((p) => podPhase(p) === phase && p.metadata.uid !== undefined && !counted.has(p.metadata.uid));
  const newSucceeded = fresh('Succeeded');
  const newFailed = fresh('Failed');
  const succeeded = num(st.succeeded, 0) + newSucceeded.length;
  const failed = num(st.failed, 0) + newFailed.length;
  let conditions: Condition[] = conditionsOf(st);
  let startTime = str(st.startTime);
  let completionTime = str(st.completionTime);
  let create = 0;
  let del: KubeObject[] = [];
  let requeueAfterMs: number | undefined;
  let expired = false;
  const finished = jobFinished(job);

  if (finished) {
    del = active;
    const ttl = spec.ttlSecondsAfterFinished;
    if (typeof ttl === 'number') {
      const doneAt =
        parseTime(completionTime) ??
        parseTime(findCondition(conditions, finished)?.lastTransitionTime) ??
        now;
      const left = doneAt + ttl * 1000 - now;
      if (left <= 0) expired = true;
      else requeueAfterMs = left;
    }
  } else if (spec.suspend === true) {
    del = active;
    conditions = setCondition(
      conditions,
      { type: 'Suspended', status: 'True', reason: 'JobSuspended', message: 'Job suspended' },
      nowIso,
    );
  } else {
    if (conditionTrue(conditions, 'Suspended')) {
      conditions = setCondition(
        conditions,
        { type: 'Suspended', status: 'False', reason: 'JobResumed', message: 'Job resumed' },
        nowIso,
      );
      startTime = nowIso;
    }
    startTime ??= nowIso;
    let failure: { reason: string; message: string } | undefined;
    const deadline = spec.activeDeadlineSeconds;
    if (failed > backoffLimit) {
      failure = { reason: 'BackoffLimitExceeded', message: 'Job has reached the specified backoff limit' };
    } else if (typeof deadline === 'number') {
      const left = (parseTime(startTime) ?? now) + deadline * 1000 - now;
      if (left <= 0)
        failure = { reason: 'DeadlineExceeded', message: 'Job was active longer than specified deadline' };
      else requeueAfterMs = left;
    }
    const success =
      completions !== undefined ? succeeded >= completions : succeeded > 0 && active.length === 0;
    const settled = active.length === 0 && terminating.length === 0;
    if (failure) {
      del = active;
      conditions = setCondition(conditions, { type: 'FailureTarget', status: 'True', ...failure }, nowIso);
      if (settled)
        conditions = setCondition(conditions, { type: 'Failed', status: 'True', ...failure }, nowIso);
      requeueAfterMs = undefined;
    } else if (success) {
      del = active;
      const reached = { reason: 'CompletionsReached', message: 'Reached expected number of succeeded pods' };
      conditions = setCondition(
        conditions,
        { type: 'SuccessCriteriaMet', status: 'True', ...reached },
        nowIso,
      );
      if (settled) {
        conditions = setCondition(conditions, { type: 'Complete', status: 'True', ...reached }, nowIso);
        completionTime = nowIso;
      }
      requeueAfterMs = undefined;
    } else {
      const wantActive =
        completions === undefined
          ? succeeded > 0
            ? 0
            : parallelism
          : Math.max(0, Math.min(parallelism, completions - succeeded));
      const have = active.length + (spec.podReplacementPolicy === 'Failed' ? terminating.length : 0);
      if (have < wantActive) create = wantActive - have;
      else if (active.length > wantActive)
        del = [...active].sort(deletionOrder).slice(0, active.length - wantActive);
    }
  }
  // The status describes the Pods as they are (the reconcile computes it again after acting).
  const status = omitEmpty(
    {
      conditions,
      startTime,
      completionTime,
      active: active.length,
      succeeded,
      failed,
      terminating: terminating.length,
      ready: active.filter(isPodReady).length,
    },
    ['conditions', 'active', 'succeeded', 'failed'],
  );
  return {
    create,
    delete: del,
    status,
    counted: [...newSucceeded, ...newFailed].map((p) => p.metadata.uid ?? ''),
    expired,
    requeueAfterMs,
  };
}

export function jobPod(job: KubeObject): KubeObject {
  return podFromTemplate(obj(job.spec).template, {
    namespace: namespaceOf(job),
    generateName: podNamePrefix(nameOf(job)),
    ownerRef: newControllerRef(job, 'batch/v1', 'Job'),
  });
}

export function jobController(ctx: SimContext): SimController {
  const { store, objects, types } = ctx;
  /** Terminal Pods already counted in status, per Job key (with the Job's UID). */
  const counted = new Map<string, { uid: string; pods: Set<string> }>();

  const countedFor = (key: string, job: KubeObject): Set<string> => {
    const entry = counted.get(key);
    if (entry && entry.uid === job.metadata.uid) return entry.pods;
    const fresh = { uid: job.metadata.uid ?? '', pods: new Set<string>() };
    counted.set(key, fresh);
    return fresh.pods;
  };

  return {
    name: 'job',
    keysFor(change: Change): string[] {
      if (change.typeKey === TYPE_KEYS.jobs) return [keyOf(change.object)];
      if (change.typeKey === TYPE_KEYS.pods) return ownerKeys(change, 'Job');
      return [];
    },
    initialKeys() {
      // Terminal Pods that exist at start are taken as counted already.
      for (const job of store.list(TYPE_KEYS.jobs)) {
        const set = countedFor(keyOf(job), job);
        for (const pod of ownedPods(ctx, job))
          if (isPodTerminal(pod) && pod.metadata.uid) set.add(pod.metadata.uid);
      }
      return allKeys(store, TYPE_KEYS.jobs);
    },
    async reconcile(key) {
      const { namespace, name } = splitKey(key);
      const job = getObject(store, TYPE_KEYS.jobs, namespace, name);
      if (!job) {
        counted.delete(key);
        return undefined;
      }
      const seen = countedFor(key, job);
      const plan = planJob(job, ownedPods(ctx, job), seen, ctx.now());
      if (plan.expired && !job.metadata.deletionTimestamp) {
        await objects.delete(
          types.jobs,
          namespace,
          name,
          { preconditions: { uid: job.metadata.uid }, propagationPolicy: 'Foreground' },
          requestContext(TTL_USER, 'kube-controller-manager'),
        );
        return undefined;
      }
      let failure: unknown;
      if (!job.metadata.deletionTimestamp) {
        try {
          for (let i = 0; i < plan.create; i++)
            await objects.create(types.pods, namespace, jobPod(job), ctxFor());
          for (const pod of plan.delete) {
            try {
              await objects.delete(
                types.pods,
                namespace,
                nameOf(pod),
                { preconditions: { uid: pod.metadata.uid } },
                ctxFor(),
              );
            } catch (error) {
              if (!isNotFound(error)) throw error;
            }
          }
        } catch (error) {
          failure = error;
        }
      }
      const latest = getObject(store, TYPE_KEYS.jobs, namespace, name);
      if (!latest || latest.metadata.uid !== job.metadata.uid) return undefined;
      const after = planJob(latest, ownedPods(ctx, latest), seen, ctx.now());
      await writeStatus(ctx, types.jobs, latest, after.status, ctxFor());
      for (const uid of after.counted) seen.add(uid);
      if (failure !== undefined) throw failure;
      return after.requeueAfterMs;
    },
  };
}
