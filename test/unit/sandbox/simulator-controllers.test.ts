// The pure decisions of the workload simulator's controllers, scheduler and kubelet.
import { describe, expect, it } from 'vitest';
import { templateHash } from '../../../src/sandbox/simulator/common.ts';
import { cronJobStatus, jobFromTemplate, planCronJob } from '../../../src/sandbox/simulator/cronjobs.ts';
import {
  deploymentStatus,
  findNewReplicaSet,
  newReplicaSetObject,
} from '../../../src/sandbox/simulator/deployments.ts';
import { planJob } from '../../../src/sandbox/simulator/jobs.ts';
import {
  exitedStatus,
  readiness,
  runningStatus,
  sandboxNode,
} from '../../../src/sandbox/simulator/kubelet.ts';
import { planReplicaSet, replicaSetStatus } from '../../../src/sandbox/simulator/replicasets.ts';
import {
  type DeploymentView,
  deploymentView,
  isScalingEvent,
  planRollout,
  type RsView,
  rollingTargets,
  scaleTargets,
} from '../../../src/sandbox/simulator/rollout.ts';
import {
  needsScheduling,
  tolerates,
  unfitReason,
  unschedulableMessage,
} from '../../../src/sandbox/simulator/scheduler.ts';
import {
  planStatefulSet,
  statefulSetPod,
  statefulSetStatus,
  updateRevisionOf,
} from '../../../src/sandbox/simulator/statefulsets.ts';
import type { KubeObject } from '../../../src/sandbox/types.ts';

const NOW = Date.parse('2024-06-01T12:00:00Z');
const NOW_ISO = '2024-06-01T12:00:00Z';
const ago = (ms: number): string => new Date(NOW - ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

interface PodOpts {
  phase?: string;
  ready?: boolean;
  node?: string;
  deleting?: boolean;
  createdMsAgo?: number;
  labels?: Record<string, string>;
  readySinceMsAgo?: number;
}

let uidCounter = 0;
function pod(name: string, o: PodOpts = {}): KubeObject {
  const conditions = o.ready
    ? [{ type: 'Ready', status: 'True', lastTransitionTime: ago(o.readySinceMsAgo ?? 60_000) }]
    : [];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'ns',
      uid: `uid-${name}-${uidCounter++}`,
      creationTimestamp: ago(o.createdMsAgo ?? 60_000),
      labels: o.labels ?? { app: 'a' },
      ...(o.deleting ? { deletionTimestamp: NOW_ISO, deletionGracePeriodSeconds: 30 } : {}),
    },
    spec: { containers: [{ name: 'c', image: 'nginx' }], ...(o.node ? { nodeName: o.node } : {}) },
    status: { phase: o.phase ?? (o.ready ? 'Running' : 'Pending'), conditions },
  };
}

const readyPod = (name: string, extra: PodOpts = {}) => pod(name, { ready: true, node: 'n1', ...extra });

function workload(
  kind: string,
  name: string,
  spec: Record<string, unknown>,
  status: Record<string, unknown> = {},
): KubeObject {
  return {
    apiVersion: kind === 'Job' || kind === 'CronJob' ? 'batch/v1' : 'apps/v1',
    kind,
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, generation: 1, creationTimestamp: ago(3_600_000) },
    spec: {
      selector: { matchLabels: { app: 'a' } },
      template: { metadata: { labels: { app: 'a' } }, spec: { containers: [{ name: 'c', image: 'nginx' }] } },
      ...spec,
    },
    status,
  };
}

describe('ReplicaSet decisions', () => {
  it('creates the missing replicas, not counting terminating or finished Pods', () => {
    const rs = workload('ReplicaSet', 'rs', { replicas: 3 });
    const plan = planReplicaSet(rs, [
      readyPod('a'),
      pod('b', { deleting: true, node: 'n1' }),
      pod('c', { phase: 'Succeeded' }),
    ]);
    expect(plan).toEqual({ create: 2, delete: [] });
  });

  it('deletes the surplus unassigned, pending, unready and newest first', () => {
    const rs = workload('ReplicaSet', 'rs', { replicas: 1 });
    const pods = [
      readyPod('old-ready', { createdMsAgo: 90_000 }),
      readyPod('new-ready', { createdMsAgo: 10_000 }),
      pod('running-unready', { phase: 'Running', node: 'n1' }),
      pod('pending-bound', { node: 'n1' }),
      pod('unassigned'),
    ];
    const plan = planReplicaSet(rs, pods);
    expect(plan.delete.map((p) => p.metadata.name)).toEqual([
      'unassigned',
      'pending-bound',
      'running-unready',
      'new-ready',
    ]);
  });

  it('reports counts, availability after minReadySeconds and the ReplicaFailure condition', () => {
    const rs = workload('ReplicaSet', 'rs', { replicas: 3, minReadySeconds: 30 });
    const pods = [
      readyPod('a', { readySinceMsAgo: 60_000 }),
      readyPod('b', { readySinceMsAgo: 1_000 }),
      pod('c', { labels: { other: 'x' } }),
    ];
    const failed = replicaSetStatus(rs, pods, NOW, { reason: 'FailedCreate', message: 'denied' }, NOW_ISO);
    expect(failed).toEqual({
      replicas: 3,
      fullyLabeledReplicas: 2,
      readyReplicas: 2,
      availableReplicas: 1,
      observedGeneration: 1,
      conditions: [
        {
          type: 'ReplicaFailure',
          status: 'True',
          reason: 'FailedCreate',
          message: 'denied',
          lastTransitionTime: NOW_ISO,
        },
      ],
    });
    const cleared = replicaSetStatus({ ...rs, status: failed }, [], NOW, undefined, NOW_ISO);
    expect(cleared).toEqual({ replicas: 0, observedGeneration: 1 });
  });
});

describe('Deployment rollout arithmetic', () => {
  const d = (replicas: number, over: Partial<DeploymentView> = {}): DeploymentView => ({
    replicas,
    maxSurge: 1,
    maxUnavailable: 1,
    recreate: false,
    paused: false,
    statusReplicas: replicas,
    ...over,
  });
  const rs = (
    name: string,
    replicas: number,
    availableReplicas: number,
    over: Partial<RsView> = {},
  ): RsView => ({
    name,
    replicas,
    availableReplicas,
    created: name === 'new' ? 2 : 1,
    revision: name === 'new' ? 2 : 1,
    desiredAnnotation: undefined,
    maxAnnotation: undefined,
    ...over,
  });

  it('resolves maxSurge up and maxUnavailable down, never both zero', () => {
    const dep = workload('Deployment', 'd', { replicas: 3 });
    expect(deploymentView(dep)).toMatchObject({ replicas: 3, maxSurge: 1, maxUnavailable: 0 });
    const fixed = workload('Deployment', 'd', {
      replicas: 10,
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: '0%' } },
    });
    expect(deploymentView(fixed)).toMatchObject({ maxSurge: 0, maxUnavailable: 1 });
    expect(deploymentView(workload('Deployment', 'd', { strategy: { type: 'Recreate' } })).recreate).toBe(
      true,
    );
  });

  it('surges the new ReplicaSet first, then scales old ones down keeping availability', () => {
    expect(rollingTargets(d(4), rs('new', 0, 0), [rs('old', 4, 4)])).toEqual(new Map([['new', 1]]));
    expect(rollingTargets(d(4), rs('new', 1, 0), [rs('old', 4, 4)])).toEqual(new Map([['old', 3]]));
    expect(rollingTargets(d(4), rs('new', 1, 1), [rs('old', 3, 3)])).toEqual(new Map([['new', 2]]));
    expect(rollingTargets(d(4), rs('new', 4, 4), [rs('old', 1, 1)])).toEqual(new Map([['old', 0]]));
    expect(rollingTargets(d(4), rs('new', 4, 4), [])).toEqual(new Map());
  });

  it('removes unavailable old replicas before available ones', () => {
    const targets = rollingTargets(d(4), rs('new', 1, 0), [
      rs('old', 4, 2, { created: 0 }),
      rs('older', 0, 0),
    ]);
    expect(targets).toEqual(new Map([['old', 3]]));
    const stuck = rollingTargets(d(4, { maxUnavailable: 0 }), rs('new', 1, 0), [rs('old', 4, 4)]);
    expect(stuck).toEqual(new Map());
  });

  it('creates the new ReplicaSet within the surge, and Recreate waits for old Pods', () => {
    expect(planRollout(d(4), 'new', undefined, [rs('old', 4, 4)], false)).toEqual({
      create: 1,
      targets: new Map([['old', 3]]),
    });
    const recreate = d(3, { recreate: true, maxSurge: 0, maxUnavailable: 0 });
    expect(planRollout(recreate, 'new', undefined, [rs('old', 3, 3)], true)).toEqual({
      targets: new Map([['old', 0]]),
    });
    expect(planRollout(recreate, 'new', undefined, [rs('old', 0, 0)], true)).toEqual({ targets: new Map() });
    expect(planRollout(recreate, 'new', undefined, [rs('old', 0, 0)], false)).toEqual({
      create: 3,
      targets: new Map(),
    });
  });

  it('scales proportionally when the replica count changes mid-rollout, and to zero at once', () => {
    const olds = [rs('old', 3, 3, { desiredAnnotation: 5, maxAnnotation: 6 })];
    const fresh = rs('new', 3, 0, { desiredAnnotation: 5, maxAnnotation: 6 });
    expect(isScalingEvent(d(10, { maxSurge: 3 }), [fresh, ...olds])).toBe(true);
    expect(scaleTargets(d(10, { maxSurge: 3, maxUnavailable: 2 }), fresh, olds)).toEqual(
      new Map([
        ['new', 7],
        ['old', 6],
      ]),
    );
    expect(planRollout(d(0, { maxSurge: 0 }), 'new', fresh, olds, true).targets).toEqual(
      new Map([
        ['new', 0],
        ['old', 0],
      ]),
    );
    expect(scaleTargets(d(2), rs('new', 5, 5), [rs('old', 0, 0)])).toEqual(new Map([['new', 2]]));
  });

  it('finds the new ReplicaSet by template, ignoring the hash label, and names it by the hash', () => {
    const dep = workload('Deployment', 'web', { replicas: 2 });
    const hash = templateHash((dep.spec as { template: unknown }).template);
    const created = newReplicaSetObject(dep, hash, 1, 3, deploymentView(dep));
    expect(created.metadata).toMatchObject({
      name: `web-${hash}`,
      labels: { app: 'a', 'pod-template-hash': hash },
      annotations: {
        'deployment.kubernetes.io/revision': '3',
        'deployment.kubernetes.io/desired-replicas': '2',
        'deployment.kubernetes.io/max-replicas': '3',
      },
      ownerReferences: [
        { kind: 'Deployment', name: 'web', uid: 'uid-web', controller: true, blockOwnerDeletion: true },
      ],
    });
    expect(created.spec).toMatchObject({
      replicas: 1,
      selector: { matchLabels: { app: 'a', 'pod-template-hash': hash } },
      template: { metadata: { labels: { app: 'a', 'pod-template-hash': hash } } },
    });
    const other = {
      ...created,
      metadata: { ...created.metadata, name: 'web-other' },
      spec: { template: { metadata: { labels: { app: 'b' } } } },
    };
    expect(findNewReplicaSet(dep, [other, created], `web-${hash}`)?.metadata.name).toBe(`web-${hash}`);
    expect(findNewReplicaSet(dep, [other], `web-${hash}`)).toBeUndefined();
  });

  it('derives the Deployment status and conditions from its ReplicaSets', () => {
    const dep = workload('Deployment', 'web', { replicas: 2 });
    const rsObj = (name: string, status: Record<string, unknown>, replicas = 2): KubeObject => ({
      metadata: { name, namespace: 'ns' },
      spec: { replicas },
      status,
    });
    const fresh = rsObj('web-new', { replicas: 2, readyReplicas: 2, availableReplicas: 2 });
    const done = deploymentStatus(dep, fresh, [fresh], NOW_ISO, {});
    expect(done).toMatchObject({
      observedGeneration: 1,
      replicas: 2,
      updatedReplicas: 2,
      readyReplicas: 2,
      availableReplicas: 2,
    });
    expect(done.unavailableReplicas).toBeUndefined();
    const conditions = done.conditions as { type: string; reason: string; status: string }[];
    expect(conditions.map((c) => [c.type, c.status, c.reason])).toEqual([
      ['Available', 'True', 'MinimumReplicasAvailable'],
      ['Progressing', 'True', 'NewReplicaSetAvailable'],
    ]);
    const failing = rsObj('web-new', {
      replicas: 0,
      conditions: [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: 'denied' }],
    });
    const bad = deploymentStatus(dep, failing, [failing], NOW_ISO, {});
    const badConditions = bad.conditions as {
      type: string;
      reason: string;
      status: string;
      message: string;
    }[];
    expect(badConditions.map((c) => [c.type, c.status, c.reason])).toEqual([
      ['Available', 'False', 'MinimumReplicasUnavailable'],
      ['Progressing', 'True', 'ReplicaSetUpdated'],
      ['ReplicaFailure', 'True', 'FailedCreate'],
    ]);
    expect(bad.unavailableReplicas).toBe(2);
    const createFailed = deploymentStatus(dep, undefined, [], NOW_ISO, {
      createError: { name: 'web-x', message: 'no' },
    });
    expect((createFailed.conditions as { type: string; reason: string; message: string }[])[1]).toMatchObject(
      {
        type: 'Progressing',
        reason: 'FailedRSCreate',
        message: 'Failed to create new replica set "web-x": no',
      },
    );
  });
});

describe('StatefulSet decisions', () => {
  const sts = (replicas: number, spec: Record<string, unknown> = {}) =>
    workload('StatefulSet', 'db', { replicas, ...spec });
  const member = (s: KubeObject, ordinal: number, o: PodOpts = {}): KubeObject => {
    const p = pod(`db-${ordinal}`, { ready: true, node: 'n1', ...o });
    p.metadata.labels = { ...p.metadata.labels, 'controller-revision-hash': updateRevisionOf(s) };
    return p;
  };
  const summary = (actions: ReturnType<typeof planStatefulSet>) =>
    actions.map((a) => (a.kind === 'create' ? `create ${a.ordinal}` : `delete ${a.pod.metadata.name}`));

  it('creates Pods one at a time, each after its predecessors are Running and Ready', () => {
    const s = sts(3);
    expect(summary(planStatefulSet(s, [], NOW))).toEqual(['create 0']);
    expect(summary(planStatefulSet(s, [member(s, 0)], NOW))).toEqual(['create 1']);
    expect(summary(planStatefulSet(s, [member(s, 0, { ready: false })], NOW))).toEqual([]);
    const parallel = sts(3, { podManagementPolicy: 'Parallel' });
    expect(summary(planStatefulSet(parallel, [], NOW))).toEqual(['create 0', 'create 1', 'create 2']);
  });

  it('scales down from the highest ordinal, one termination at a time', () => {
    const s = sts(1);
    const pods = [member(s, 0), member(s, 1), member(s, 2)];
    expect(summary(planStatefulSet(s, pods, NOW))).toEqual(['delete db-2']);
    const terminating = [member(s, 0), member(s, 1), member(s, 2, { deleting: true })];
    expect(summary(planStatefulSet(s, terminating, NOW))).toEqual([]);
    // Like kube: unhealthy condemned Pods block OrderedReady scale-down unless it is the first unhealthy one.
    const zero = sts(0);
    const unready = [0, 1, 2].map((i) => member(zero, i, { ready: false, node: undefined }));
    expect(summary(planStatefulSet(zero, unready, NOW))).toEqual([]);
    expect(summary(planStatefulSet(zero, unready.slice(0, 1), NOW))).toEqual(['delete db-0']);
  });

  it('replaces finished Pods and rolls template changes from the top', () => {
    const s = sts(2);
    expect(
      summary(planStatefulSet(s, [member(s, 0, { phase: 'Failed', ready: false }), member(s, 1)], NOW)),
    ).toEqual(['delete db-0']);
    const stale = [member(s, 0), member(s, 1)].map((p) => ({
      ...p,
      metadata: { ...p.metadata, labels: { ...p.metadata.labels, 'controller-revision-hash': 'db-old' } },
    }));
    expect(summary(planStatefulSet(s, stale, NOW))).toEqual(['delete db-1']);
    const onDelete = sts(2, { updateStrategy: { type: 'OnDelete' } });
    expect(summary(planStatefulSet(onDelete, stale, NOW))).toEqual([]);
  });

  it('builds stable Pods and reports the revisions', () => {
    const s = sts(2, { serviceName: 'db-svc' });
    const p = statefulSetPod(s, 1);
    expect(p.metadata).toMatchObject({
      name: 'db-1',
      labels: { app: 'a', 'statefulset.kubernetes.io/pod-name': 'db-1', 'apps.kubernetes.io/pod-index': '1' },
      ownerReferences: [{ kind: 'StatefulSet', name: 'db', controller: true, blockOwnerDeletion: true }],
    });
    expect(p.spec).toMatchObject({ hostname: 'db-1', subdomain: 'db-svc' });
    const status = statefulSetStatus(s, [member(s, 0), member(s, 1, { ready: false })], NOW);
    expect(status).toMatchObject({ replicas: 2, readyReplicas: 1, updatedReplicas: 2, availableReplicas: 1 });
    expect(status.updateRevision).toBe(updateRevisionOf(s));
  });
});

describe('Job decisions', () => {
  const job = (spec: Record<string, unknown>, status: Record<string, unknown> = {}) =>
    workload('Job', 'j', { parallelism: 2, completions: 3, backoffLimit: 6, ...spec }, status);

  it('starts up to min(parallelism, remaining completions) Pods', () => {
    const fresh = planJob(job({}), [], new Set(), NOW);
    expect(fresh.create).toBe(2);
    expect(fresh.status).toMatchObject({ startTime: NOW_ISO, ready: 0, terminating: 0 });
    const done = pod('p1', { phase: 'Succeeded' });
    const later = planJob(job({}, { startTime: NOW_ISO }), [done, readyPod('p2')], new Set(), NOW);
    expect(later.create).toBe(1);
    expect(later.counted).toEqual([done.metadata.uid]);
    expect(later.status).toMatchObject({ succeeded: 1, active: 1, ready: 1 });
  });

  it('counts a finished Pod once and completes when the completions are reached', () => {
    const a = pod('a', { phase: 'Succeeded' });
    const b = pod('b', { phase: 'Succeeded' });
    const c = pod('c', { phase: 'Succeeded' });
    const plan = planJob(
      job({}, { startTime: NOW_ISO, succeeded: 2 }),
      [a, b, c],
      new Set([a.metadata.uid!, b.metadata.uid!]),
      NOW,
    );
    expect(plan.status.succeeded).toBe(3);
    expect(plan.status.completionTime).toBe(NOW_ISO);
    const types = (plan.status.conditions as { type: string }[]).map((x) => x.type);
    expect(types).toEqual(['SuccessCriteriaMet', 'Complete']);
    expect(plan.create).toBe(0);
  });

  it('suspends: deletes active Pods and sets Suspended; resuming resets startTime', () => {
    const running = readyPod('r');
    const suspended = planJob(job({ suspend: true }, { startTime: ago(60_000) }), [running], new Set(), NOW);
    expect(suspended.delete).toEqual([running]);
    expect(suspended.create).toBe(0);
    expect(suspended.status.conditions).toEqual([
      {
        type: 'Suspended',
        status: 'True',
        reason: 'JobSuspended',
        message: 'Job suspended',
        lastTransitionTime: NOW_ISO,
      },
    ]);
    const created = planJob(job({ suspend: true }), [], new Set(), NOW);
    expect(created.status.startTime).toBeUndefined();
    const resumed = planJob(job({ suspend: false }, suspended.status), [], new Set(), NOW + 5000);
    expect(resumed.status.startTime).toBe('2024-06-01T12:00:05Z');
    expect(resumed.create).toBe(2);
  });

  it('fails past backoffLimit and activeDeadlineSeconds', () => {
    const failedPods = [pod('f1', { phase: 'Failed' }), pod('f2', { phase: 'Failed' })];
    const plan = planJob(
      job({ backoffLimit: 1 }, { startTime: NOW_ISO }),
      [...failedPods, readyPod('r')],
      new Set(),
      NOW,
    );
    expect(plan.delete.map((p) => p.metadata.name)).toEqual(['r']);
    expect((plan.status.conditions as { type: string }[]).map((c) => c.type)).toEqual(['FailureTarget']);
    const settled = planJob(job({ backoffLimit: 1 }, { startTime: NOW_ISO }), failedPods, new Set(), NOW);
    expect(
      (settled.status.conditions as { type: string; reason: string }[]).map((c) => [c.type, c.reason]),
    ).toEqual([
      ['FailureTarget', 'BackoffLimitExceeded'],
      ['Failed', 'BackoffLimitExceeded'],
    ]);
    const running = planJob(
      job({ activeDeadlineSeconds: 120 }, { startTime: ago(60_000) }),
      [readyPod('r')],
      new Set(),
      NOW,
    );
    expect(running.requeueAfterMs).toBe(60_000);
    const late = planJob(job({ activeDeadlineSeconds: 30 }, { startTime: ago(60_000) }), [], new Set(), NOW);
    expect((late.status.conditions as { reason: string }[])[1]?.reason).toBe('DeadlineExceeded');
  });

  it('expires a finished Job after ttlSecondsAfterFinished', () => {
    const finished = {
      completionTime: ago(10_000),
      conditions: [{ type: 'Complete', status: 'True' }],
    };
    expect(planJob(job({ ttlSecondsAfterFinished: 5 }, finished), [], new Set(), NOW).expired).toBe(true);
    const waiting = planJob(job({ ttlSecondsAfterFinished: 30 }, finished), [], new Set(), NOW);
    expect(waiting).toMatchObject({ expired: false, requeueAfterMs: 20_000 });
  });
});

describe('CronJob decisions', () => {
  const cron = (spec: Record<string, unknown>, status: Record<string, unknown> = {}): KubeObject => ({
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name: 'cj', namespace: 'ns', uid: 'uid-cj', creationTimestamp: '2024-06-01T11:00:30Z' },
    spec: {
      schedule: '*/10 * * * *',
      concurrencyPolicy: 'Allow',
      successfulJobsHistoryLimit: 3,
      failedJobsHistoryLimit: 1,
      jobTemplate: {
        metadata: { labels: { team: 't' } },
        spec: { template: { spec: { restartPolicy: 'Never' } } },
      },
      ...spec,
    },
    status,
  });
  const cjJob = (
    name: string,
    state: 'active' | 'Complete' | 'Failed',
    createdMsAgo = 60_000,
  ): KubeObject => ({
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, creationTimestamp: ago(createdMsAgo) },
    status:
      state === 'active'
        ? { active: 1 }
        : { conditions: [{ type: state, status: 'True' }], completionTime: ago(createdMsAgo - 1000) },
  });

  it('runs the most recent unmet schedule time and waits for the next one', () => {
    const minutes = Math.floor(NOW / 60_000);
    const plan = planCronJob(cron({}, { lastScheduleTime: '2024-06-01T11:50:00Z' }), [], NOW, undefined);
    expect(plan.run).toEqual({ name: `cj-${minutes}`, scheduledTime: NOW });
    expect(plan.requeueAfterMs).toBe(600_000); // 12:10 (+5 ms), capped at ten minutes
    const idle = planCronJob(cron({}, { lastScheduleTime: NOW_ISO }), [], NOW + 1000, undefined);
    expect(idle.run).toBeUndefined();
    expect(idle.requeueAfterMs).toBe(599_005);
  });

  it('honours suspend, startingDeadlineSeconds and an invalid schedule', () => {
    expect(planCronJob(cron({ suspend: true }), [], NOW, 'now').run).toBeUndefined();
    expect(
      planCronJob(cron({ startingDeadlineSeconds: 30 }), [], NOW + 60_000, undefined).run,
    ).toBeUndefined();
    expect(
      planCronJob(cron({ startingDeadlineSeconds: 90 }), [], NOW + 60_000, undefined).run?.scheduledTime,
    ).toBe(NOW);
    expect(planCronJob(cron({ schedule: '61 * * * *' }), [], NOW, undefined).invalid).toContain(
      'above maximum',
    );
  });

  it('applies the concurrency policy', () => {
    const active = [cjJob('cj-1', 'active')];
    const base = { lastScheduleTime: '2024-06-01T11:50:00Z' };
    expect(
      planCronJob(cron({ concurrencyPolicy: 'Forbid' }, base), active, NOW, undefined).run,
    ).toBeUndefined();
    const replace = planCronJob(cron({ concurrencyPolicy: 'Replace' }, base), active, NOW, undefined);
    expect(replace.replace.map((j) => j.metadata.name)).toEqual(['cj-1']);
    expect(replace.run).toBeDefined();
    expect(planCronJob(cron({}, base), active, NOW, undefined).replace).toEqual([]);
  });

  it('runs a trigger as an extra run, after a due schedule', () => {
    const triggered = planCronJob(cron({}, { lastScheduleTime: NOW_ISO }), [], NOW + 5000, 'go');
    expect(triggered.run).toEqual({
      name: `cj-${Math.floor((NOW + 5000) / 1000)}`,
      scheduledTime: NOW + 5000,
      trigger: 'go',
    });
    const both = planCronJob(cron({}, { lastScheduleTime: '2024-06-01T11:50:00Z' }), [], NOW, 'go');
    expect(both.run?.trigger).toBeUndefined();
    expect(both.requeueAfterMs).toBe(0);
    const job = jobFromTemplate(cron({}), triggered.run!);
    expect(job.metadata).toMatchObject({
      name: triggered.run!.name,
      labels: { team: 't' },
      annotations: {
        'batch.kubernetes.io/cronjob-scheduled-timestamp': '2024-06-01T12:00:05Z',
        'sandbox.berth.skaphos.io/trigger': 'go',
      },
      ownerReferences: [{ kind: 'CronJob', name: 'cj', uid: 'uid-cj', controller: true }],
    });
  });

  it('prunes finished Jobs beyond the history limits and reports status', () => {
    const jobs = [
      cjJob('c1', 'Complete', 500_000),
      cjJob('c2', 'Complete', 400_000),
      cjJob('c3', 'Complete', 300_000),
      cjJob('c4', 'Complete', 200_000),
      cjJob('f1', 'Failed', 150_000),
      cjJob('f2', 'Failed', 100_000),
      cjJob('a1', 'active', 1000),
    ];
    const plan = planCronJob(cron({ suspend: true }), jobs, NOW, undefined);
    expect(plan.prune.map((j) => j.metadata.name)).toEqual(['c1', 'f1']);
    const status = cronJobStatus(cron({}), jobs, NOW);
    expect(status).toEqual({
      active: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'a1', namespace: 'ns', uid: 'uid-a1' }],
      lastScheduleTime: NOW_ISO,
      lastSuccessfulTime: ago(199_000),
    });
  });
});

describe('scheduler decisions', () => {
  const node = (
    name: string,
    spec: Record<string, unknown> = {},
    labels: Record<string, string> = {},
  ): KubeObject => ({
    metadata: { name, labels },
    spec,
  });

  it('schedules only ungated, unbound, pending Pods of the default scheduler', () => {
    expect(needsScheduling(pod('p'))).toBe(true);
    expect(needsScheduling(pod('p', { node: 'n1' }))).toBe(false);
    expect(needsScheduling(pod('p', { deleting: true }))).toBe(false);
    const gated = pod('g');
    (gated.spec as Record<string, unknown>).schedulingGates = [{ name: 'x' }];
    expect(needsScheduling(gated)).toBe(false);
    const other = pod('o');
    (other.spec as Record<string, unknown>).schedulerName = 'custom';
    expect(needsScheduling(other)).toBe(false);
  });

  it('honours taints, tolerations, unschedulable Nodes and nodeSelector', () => {
    const p = pod('p');
    const tainted = node('t', {
      taints: [{ key: 'aether.io/agent-not-ready', value: 'true', effect: 'NoSchedule' }],
    });
    expect(unfitReason(p, tainted)).toBe('node(s) had untolerated taint {aether.io/agent-not-ready: true}');
    expect(
      unfitReason(p, node('soft', { taints: [{ key: 'k', effect: 'PreferNoSchedule' }] })),
    ).toBeUndefined();
    expect(unfitReason(p, node('cordoned', { unschedulable: true }))).toBe('node(s) were unschedulable');
    const tolerant = pod('tol');
    (tolerant.spec as Record<string, unknown>).tolerations = [
      { key: 'aether.io/agent-not-ready', operator: 'Exists' },
    ];
    expect(unfitReason(tolerant, tainted)).toBeUndefined();
    expect(tolerates(tolerant, { key: 'other', effect: 'NoSchedule' })).toBe(false);
    const everything = pod('all');
    (everything.spec as Record<string, unknown>).tolerations = [{ operator: 'Exists' }];
    expect(tolerates(everything, { key: 'any', value: 'v', effect: 'NoExecute' })).toBe(true);
    const picky = pod('picky');
    (picky.spec as Record<string, unknown>).nodeSelector = { disk: 'ssd' };
    expect(unfitReason(picky, node('hdd', {}, { disk: 'hdd' }))).toBe(
      "node(s) didn't match Pod's node affinity/selector",
    );
    expect(unfitReason(picky, node('ssd', {}, { disk: 'ssd' }))).toBeUndefined();
  });

  it('words the unschedulable message like kube-scheduler', () => {
    expect(unschedulableMessage([], 0)).toBe('no nodes available to schedule pods');
    expect(
      unschedulableMessage(
        ['node(s) were unschedulable', 'node(s) had untolerated taint {a: }', 'node(s) were unschedulable'],
        3,
      ),
    ).toBe('0/3 nodes are available: 1 node(s) had untolerated taint {a: }, 2 node(s) were unschedulable.');
  });
});

describe('kubelet decisions', () => {
  it('reports a started Pod Running and Ready, with readiness gates deciding Ready', () => {
    const p = pod('p', { node: 'sandbox-node-1' });
    const status = runningStatus(p, sandboxNode('sandbox-node-1', NOW_ISO), '10.244.0.7', NOW_ISO);
    expect(status).toMatchObject({
      phase: 'Running',
      hostIP: '10.0.0.1',
      podIP: '10.244.0.7',
      startTime: NOW_ISO,
      containerStatuses: [
        {
          name: 'c',
          ready: true,
          started: true,
          restartCount: 0,
          state: { running: { startedAt: NOW_ISO } },
        },
      ],
    });
    const conditions = status.conditions as { type: string; status: string }[];
    expect(conditions.map((c) => `${c.type}=${c.status}`).sort()).toEqual([
      'ContainersReady=True',
      'Initialized=True',
      'PodReadyToStartContainers=True',
      'PodScheduled=True',
      'Ready=True',
    ]);
    const gated = pod('g', { node: 'n1' });
    (gated.spec as Record<string, unknown>).readinessGates = [{ conditionType: 'example.com/ok' }];
    expect(readiness(gated, [])).toEqual({
      ready: false,
      message: 'corresponding condition of pod readiness gate "example.com/ok" does not exist.',
    });
    expect(readiness(gated, [{ type: 'example.com/ok', status: 'True' }])).toEqual({ ready: true });
  });

  it('finishes run-to-completion Pods with their exit code', () => {
    const p = pod('p', { node: 'n1' });
    const running = { ...p, status: runningStatus(p, sandboxNode('n1', NOW_ISO), '10.244.0.8', NOW_ISO) };
    const ok = exitedStatus(running, 0, NOW_ISO);
    expect(ok.phase).toBe('Succeeded');
    expect((ok.containerStatuses as { state: unknown }[])[0]?.state).toMatchObject({
      terminated: { exitCode: 0, reason: 'Completed', finishedAt: NOW_ISO },
    });
    const bad = exitedStatus(running, 3, NOW_ISO);
    expect(bad.phase).toBe('Failed');
    expect(
      (bad.conditions as { type: string; status: string; reason?: string }[]).find((c) => c.type === 'Ready'),
    ).toMatchObject({
      status: 'False',
      reason: 'PodCompleted',
    });
  });
});
