// The CronJob controller (pkg/controller/cronjob, v2): at the most recent unmet schedule time (since
// status.lastScheduleTime, else creation, bounded by startingDeadlineSeconds) it creates the Job
// `<cronjob>-<scheduled time in minutes>` from spec.jobTemplate with the
// `batch.kubernetes.io/cronjob-scheduled-timestamp` annotation and a controller ownerReference, honouring
// `suspend` and `concurrencyPolicy` (Allow; Forbid skips while a Job is active; Replace deletes the active
// Jobs first); it keeps status.active / lastScheduleTime / lastSuccessfulTime and deletes finished Jobs
// beyond successfulJobsHistoryLimit / failedJobsHistoryLimit. spec.timeZone is honoured (UTC when unset;
// the real controller would use kube-controller-manager's local zone).
//
// Running a CronJob now, for tests: set the annotation `sandbox.berth.skaphos.io/trigger` to a new value
// (e.g. `kubectl annotate cronjob/x sandbox.berth.skaphos.io/trigger=$(date +%s) --overwrite`). Each new
// value is one extra run, named `<cronjob>-<unix seconds>`, stamped with the same annotation; it counts as
// a schedule time at the moment it is seen: it waits while the CronJob is suspended or a Forbid policy
// blocks it, and Replace replaces the active Jobs. It does not move status.lastScheduleTime.
// Not simulated: the TooManyMissedTimes / UnknownTimeZone events (an invalid schedule or zone just never
// runs), resourceVersion in status.active references.
import { rfc3339 } from '../objects.ts';
import type { Change } from '../store.ts';
import type { KubeObject } from '../types.ts';
import {
  controllerUser,
  isAlreadyExists,
  isControlledBy,
  isNotFound,
  keyOf,
  nameOf,
  namespaceOf,
  newControllerRef,
  obj,
  omitEmpty,
  parseTime,
  requestContext,
  splitKey,
  str,
  strMap,
  TRIGGER_ANNOTATION,
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
import { CronError, parseCron } from './cron.ts';
import { jobFinished } from './jobs.ts';

const USER = controllerUser('cronjob-controller');
const ctxFor = () => requestContext(USER, 'kube-controller-manager');

export const SCHEDULED_TIMESTAMP_ANNOTATION = 'batch.kubernetes.io/cronjob-scheduled-timestamp';
/** Longest timer the controller arms; it re-plans afterwards (clock jumps, very distant schedules). */
const MAX_WAIT_MS = 10 * 60_000;

export interface CronRun {
  name: string;
  scheduledTime: number;
  /** The trigger annotation value this run answers, for a manual run. */
  trigger?: string;
}

export interface CronPlan {
  /** Job to create now (after deleting `replace`), unless one of that name exists already. */
  run?: CronRun;
  /** Active Jobs to delete first (concurrencyPolicy Replace). */
  replace: KubeObject[];
  /** Finished Jobs beyond the history limits. */
  prune: KubeObject[];
  /** The schedule (or time zone) is invalid. */
  invalid?: string;
  requeueAfterMs?: number;
}

const createdAt = (o: KubeObject): number => parseTime(o.metadata.creationTimestamp) ?? 0;

/** syncCronJob: what to do now, given the CronJob's Jobs and a pending manual trigger. */
export function planCronJob(
  cj: KubeObject,
  jobs: KubeObject[],
  now: number,
  trigger: string | undefined,
): CronPlan {
  const spec = obj(cj.spec);
  const plan: CronPlan = { replace: [], prune: [] };
  const finished = jobs
    .filter((j) => jobFinished(j) !== undefined)
    .sort((a, b) => createdAt(a) - createdAt(b));
  const prune = (kind: 'Complete' | 'Failed', limit: unknown) => {
    if (typeof limit !== 'number') return;
    const list = finished.filter((j) => jobFinished(j) === kind && !j.metadata.deletionTimestamp);
    plan.prune.push(...list.slice(0, Math.max(0, list.length - limit)));
  };
  prune('Complete', spec.successfulJobsHistoryLimit);
  prune('Failed', spec.failedJobsHistoryLimit);
  if (cj.metadata.deletionTimestamp || spec.suspend === true) return plan;

  let schedule: ReturnType<typeof parseCron>;
  try {
    schedule = parseCron(str(spec.schedule) ?? '', str(spec.timeZone));
  } catch (err) {
    plan.invalid = err instanceof CronError ? err.message : String(err);
    return plan;
  }
  const st = obj(cj.status);
  let earliest = parseTime(st.lastScheduleTime) ?? createdAt(cj);
  const startingDeadline = spec.startingDeadlineSeconds;
  if (typeof startingDeadline === 'number') earliest = Math.max(earliest, now - startingDeadline * 1000);
  const scheduled = schedule.mostRecent(earliest, now);
  const next = schedule.next(now);
  if (next !== undefined) plan.requeueAfterMs = Math.min(MAX_WAIT_MS, next - now + 5);

  let run: CronRun | undefined;
  if (scheduled !== undefined)
    run = { name: `${nameOf(cj)}-${Math.floor(scheduled / 60_000)}`, scheduledTime: scheduled };
  else if (trigger !== undefined)
    run = { name: `${nameOf(cj)}-${Math.floor(now / 1000)}`, scheduledTime: now, trigger };
  if (!run) return plan;
  if (jobs.some((j) => nameOf(j) === run.name)) {
    plan.run = run; // already created: the reconcile only records it
    return plan;
  }
  const active = jobs.filter((j) => jobFinished(j) === undefined && !j.metadata.deletionTimestamp);
  const policy = spec.concurrencyPolicy ?? 'Allow';
  if (policy === 'Forbid' && active.length > 0) return plan;
  if (policy === 'Replace') plan.replace = active;
  plan.run = run;
  // A pending trigger behind a due schedule runs on the next pass.
  if (scheduled !== undefined && trigger !== undefined) plan.requeueAfterMs = 0;
  return plan;
}

/** getJobFromTemplate2: the Job a CronJob creates for a scheduled time. */
export function jobFromTemplate(cj: KubeObject, run: CronRun): KubeObject {
  const template = obj(obj(cj.spec).jobTemplate);
  const meta = obj(template.metadata);
  const annotations: Record<string, string> = {
    ...strMap(meta.annotations),
    [SCHEDULED_TIMESTAMP_ANNOTATION]: rfc3339(run.scheduledTime),
  };
  if (run.trigger !== undefined) annotations[TRIGGER_ANNOTATION] = run.trigger;
  const labels = strMap(meta.labels);
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: run.name,
      namespace: namespaceOf(cj),
      ...(Object.keys(labels).length > 0 ? { labels } : {}),
      annotations,
      ownerReferences: [newControllerRef(cj, 'batch/v1', 'CronJob')],
    },
    spec: structuredClone(obj(template.spec)),
  };
}

/** status.active / lastScheduleTime / lastSuccessfulTime. */
export function cronJobStatus(cj: KubeObject, jobs: KubeObject[], lastScheduleTime: number | undefined) {
  const st = obj(cj.status);
  const active = jobs
    .filter((j) => jobFinished(j) === undefined)
    .sort((a, b) => createdAt(a) - createdAt(b) || (nameOf(a) < nameOf(b) ? -1 : 1))
    .map((j) => ({
      apiVersion: 'batch/v1',
      kind: 'Job',
      name: nameOf(j),
      namespace: namespaceOf(j),
      uid: j.metadata.uid,
    }));
  let lastSuccess = parseTime(st.lastSuccessfulTime);
  for (const j of jobs) {
    if (jobFinished(j) !== 'Complete') continue;
    const t = parseTime(obj(j.status).completionTime);
    if (t !== undefined && (lastSuccess === undefined || t > lastSuccess)) lastSuccess = t;
  }
  const previous = parseTime(st.lastScheduleTime);
  const last =
    lastScheduleTime !== undefined && (previous === undefined || lastScheduleTime > previous)
      ? lastScheduleTime
      : previous;
  return omitEmpty(
    {
      active,
      lastScheduleTime: last === undefined ? undefined : rfc3339(last),
      lastSuccessfulTime: lastSuccess === undefined ? undefined : rfc3339(lastSuccess),
    },
    ['active'],
  );
}

export function cronJobController(ctx: SimContext): SimController {
  const { store, objects, types } = ctx;
  /** Trigger values already run, by CronJob UID. */
  const handled = new Map<string, string>();

  const ownedJobs = (cj: KubeObject): KubeObject[] =>
    store.list(TYPE_KEYS.jobs, namespaceOf(cj)).filter((j) => isControlledBy(j, cj));

  function pendingTrigger(cj: KubeObject, jobs: KubeObject[]): string | undefined {
    const value = cj.metadata.annotations?.[TRIGGER_ANNOTATION];
    if (!value || handled.get(cj.metadata.uid ?? '') === value) return undefined;
    if (jobs.some((j) => j.metadata.annotations?.[TRIGGER_ANNOTATION] === value)) {
      handled.set(cj.metadata.uid ?? '', value);
      return undefined;
    }
    return value;
  }

  async function deleteJob(job: KubeObject): Promise<void> {
    try {
      await objects.delete(
        types.jobs,
        namespaceOf(job),
        nameOf(job),
        { preconditions: { uid: job.metadata.uid }, propagationPolicy: 'Background' },
        ctxFor(),
      );
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }

  return {
    name: 'cronjob',
    keysFor(change: Change): string[] {
      if (change.typeKey === TYPE_KEYS.cronjobs) {
        if (change.type === 'DELETED' && change.object.metadata.uid)
          handled.delete(change.object.metadata.uid);
        return [keyOf(change.object)];
      }
      if (change.typeKey === TYPE_KEYS.jobs) return ownerKeys(change, 'CronJob');
      return [];
    },
    initialKeys: () => allKeys(store, TYPE_KEYS.cronjobs),
    async reconcile(key) {
      const { namespace, name } = splitKey(key);
      const cj = getObject(store, TYPE_KEYS.cronjobs, namespace, name);
      if (!cj) return undefined;
      const jobs = ownedJobs(cj);
      const trigger = pendingTrigger(cj, jobs);
      const plan = planCronJob(cj, jobs, ctx.now(), trigger);
      let scheduled: number | undefined;
      if (plan.run) {
        const run = plan.run;
        for (const job of plan.replace) await deleteJob(job);
        if (!jobs.some((j) => nameOf(j) === run.name)) {
          try {
            await objects.create(types.jobs, namespace, jobFromTemplate(cj, run), ctxFor());
          } catch (error) {
            if (!isAlreadyExists(error)) throw error;
          }
        }
        if (run.trigger !== undefined) handled.set(cj.metadata.uid ?? '', run.trigger);
        else scheduled = run.scheduledTime;
      }
      for (const job of plan.prune) await deleteJob(job);
      const latest = getObject(store, TYPE_KEYS.cronjobs, namespace, name);
      if (!latest || latest.metadata.uid !== cj.metadata.uid) return undefined;
      await writeStatus(
        ctx,
        types.cronjobs,
        latest,
        cronJobStatus(latest, ownedJobs(latest), scheduled),
        ctxFor(),
      );
      return plan.requeueAfterMs;
    },
  };
}
