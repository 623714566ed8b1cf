// The typed test builders (test/builders/, docs/testing.md "Builders"): valid objects by default that the
// product's own parsers accept, setters that change only their field, fresh copies, and clear errors.
import { describe, expect, it } from 'vitest';
import { FINALIZER, validateSpec } from '../../../src/berth/api.ts';
import { parseBerthLease } from '../../../src/berth/leaseio.ts';
import { parseWorkload } from '../../../src/workloads/model.ts';
import { BerthLeaseBuilder } from '../../builders/berthlease.ts';
import { CronJobBuilder } from '../../builders/cronjob.ts';
import { DeploymentBuilder } from '../../builders/deployment.ts';
import { JobBuilder } from '../../builders/job.ts';
import { NodeBuilder } from '../../builders/node.ts';
import { ownerReference } from '../../builders/object.ts';
import { PodBuilder } from '../../builders/pod.ts';
import type { PodSpecBuilder } from '../../builders/pod-spec.ts';
import { ReplicaSetBuilder } from '../../builders/replicaset.ts';
import { StatefulSetBuilder } from '../../builders/statefulset.ts';

const APP = { name: 'app', image: 'registry.example.com/app:1' };

describe('workload builders', () => {
  it('build a valid object of each kind by default, which the workload model accepts', () => {
    const template = { metadata: { labels: { app: 'w' } }, spec: { containers: [APP] } };
    const selected = { replicas: 1, selector: { matchLabels: { app: 'w' } }, template };
    expect(new PodBuilder('w').obj()).toEqual({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'w' },
      spec: { containers: [APP] },
    });
    expect(new DeploymentBuilder('w').obj()).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'w' },
      spec: selected,
    });
    expect(new ReplicaSetBuilder('w').obj().spec).toEqual(selected);
    expect(new StatefulSetBuilder('w').obj().spec).toEqual(selected);
    const never = { ...template, spec: { ...template.spec, restartPolicy: 'Never' } };
    expect(new JobBuilder('w').obj()).toMatchObject({
      apiVersion: 'batch/v1',
      kind: 'Job',
      spec: { template: never },
    });
    expect(new CronJobBuilder('w').obj()).toMatchObject({
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      spec: { schedule: '*/5 * * * *', jobTemplate: { spec: { template: never } } },
    });
    for (const b of [
      new PodBuilder('w'),
      new DeploymentBuilder('w'),
      new ReplicaSetBuilder('w'),
      new StatefulSetBuilder('w'),
      new JobBuilder('w'),
      new CronJobBuilder('w'),
    ])
      expect(parseWorkload(b.json()).ok).toBe(true);
  });

  it('set the Pod spec of a Pod and of a template alike', () => {
    const set = <T extends PodSpecBuilder<unknown>>(b: T): T =>
      b
        .gates('g')
        .nodeName('n')
        .restartPolicy('Always')
        .terminationGracePeriodSeconds(1)
        .containers({ name: 'c' });
    const spec = {
      containers: [{ name: 'c' }],
      terminationGracePeriodSeconds: 1,
      restartPolicy: 'Always',
      nodeName: 'n',
      schedulingGates: [{ name: 'g' }],
    };
    expect(set(new PodBuilder('p')).obj().spec).toEqual(spec);
    expect(set(new DeploymentBuilder('d')).obj().spec?.template.spec).toEqual(spec);
    expect(new PodBuilder('p').gates().obj().spec?.schedulingGates).toEqual([]);
  });

  it('write metadata in one order whatever the order of the setters, timestamps as RFC 3339 strings', () => {
    const a = new PodBuilder('p')
      .deleting(0)
      .annotations({ a: '1' })
      .labels({ l: '1' })
      .uid('u')
      .namespace('ns');
    const b = new PodBuilder('p')
      .namespace('ns')
      .uid('u')
      .labels({ l: '1' })
      .annotations({ a: '1' })
      .deleting(0);
    expect(JSON.stringify(a.obj())).toBe(JSON.stringify(b.obj()));
    expect(a.json().metadata).toEqual({
      name: 'p',
      namespace: 'ns',
      uid: 'u',
      labels: { l: '1' },
      annotations: { a: '1' },
      deletionTimestamp: '1970-01-01T00:00:00Z',
    });
    expect(new PodBuilder({ generateName: 'probe-' }).obj().metadata).toEqual({ generateName: 'probe-' });
  });

  it('hands out fresh copies', () => {
    const b = new PodBuilder('p').labels({ a: '1' });
    const first = b.obj();
    first.metadata!.labels!.a = 'changed';
    expect(b.obj().metadata?.labels).toEqual({ a: '1' });
  });

  it('sets no replicas on request, and the Ready condition and phase of a Pod', () => {
    expect(new DeploymentBuilder('d').replicas(undefined).obj().spec).not.toHaveProperty('replicas');
    expect(new PodBuilder('p').phase('Running').ready(false, 5_000).obj().status).toEqual({
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: '1970-01-01T00:00:05Z' }],
    });
    expect(new PodBuilder('p').conditions().obj().status).toEqual({ conditions: [] });
  });
});

describe('ownedBy', () => {
  it('adds the controller reference of an object or of a named owner, its apiVersion by kind', () => {
    const rs = new ReplicaSetBuilder('web-5d9c').uid('rs-uid').obj();
    const ref = {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      name: 'web-5d9c',
      uid: 'rs-uid',
      controller: true,
      blockOwnerDeletion: true,
    };
    expect(new PodBuilder('p').ownedBy(rs).obj().metadata?.ownerReferences).toEqual([ref]);
    expect(ownerReference({ kind: 'ReplicaSet', name: 'web-5d9c', uid: 'rs-uid' })).toEqual(ref);
    expect(
      ownerReference({ kind: 'Thing', apiVersion: 'x.io/v1', name: 'n', uid: 'u' }, { controller: false }),
    ).toEqual({
      apiVersion: 'x.io/v1',
      kind: 'Thing',
      name: 'n',
      uid: 'u',
      controller: false,
      blockOwnerDeletion: true,
    });
  });

  it('refuses an owner it cannot name, with a clear error', () => {
    const listItem = { metadata: { name: 'web-5d9c', uid: 'rs-uid' } };
    expect(() => ownerReference(listItem)).toThrow(
      'an owner needs a kind, a name and a uid: {"name":"web-5d9c","uid":"rs-uid"}',
    );
    expect(() => ownerReference({ kind: 'Thing', name: 'n', uid: 'u' })).toThrow(
      'the apiVersion of an owner of kind Thing is needed',
    );
    expect(ownerReference({ ...listItem, kind: 'ReplicaSet' }).apiVersion).toBe('apps/v1');
  });
});

describe('NodeBuilder', () => {
  it('builds a Node without taints, or with the ones added', () => {
    expect(new NodeBuilder('n').obj()).toEqual({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'n' },
      spec: {},
    });
    const taint = { key: 'k', effect: 'NoSchedule' };
    expect(new NodeBuilder('n').taints(taint).taints().obj().spec).toEqual({ taints: [taint] });
  });
});

describe('BerthLeaseBuilder', () => {
  it('builds a valid lease-only BerthLease by default, and a managed one with a target and actions', () => {
    const plain = new BerthLeaseBuilder('l').namespace('ns').obj();
    expect(parseBerthLease(plain)).toEqual(plain);
    expect(validateSpec(plain.spec)).toBeUndefined();
    expect(plain.spec).toEqual({
      leaseName: 'l',
      holderIdentity: 'cluster-east',
      ttlSeconds: 30,
      heartbeatIntervalSeconds: 10,
      semantics: 'at-most-once',
    });
    const managed = new BerthLeaseBuilder('web').withFinalizer().targets('Deployment', 'web').scales(3).obj();
    expect(validateSpec(managed.spec)).toBeUndefined();
    expect(managed.metadata.finalizers).toEqual([FINALIZER]);
    expect(managed.spec).toMatchObject({
      target: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' },
      acquireAction: { scale: { replicas: 3 } },
      releaseAction: { scale: { replicas: 0 } },
    });
    expect(new BerthLeaseBuilder('c').targets('CronJob', 'c').suspends().spec()).toMatchObject({
      target: { apiVersion: 'batch/v1', kind: 'CronJob', name: 'c' },
      acquireAction: { suspend: false },
      releaseAction: { suspend: true },
    });
  });

  it('sets the status or only its workload, and the deletion as the API server writes it', () => {
    const workload = { targetUID: 't', phase: 'Active' as const };
    const lease = new BerthLeaseBuilder('l')
      .status({ leaseState: 'held' })
      .workload(workload)
      .deleting(0)
      .obj();
    expect(lease.status).toEqual({ leaseState: 'held', workload });
    expect(lease.metadata.deletionTimestamp).toBe('1970-01-01T00:00:00Z');
    expect(new BerthLeaseBuilder('l').obj()).not.toHaveProperty('status');
  });
});
