// Managed workloads on a real cluster (E2E_KUBECONFIG and E2E_WEBHOOK_HOST, or a control plane of this
// file's own): the operator runs out of cluster as its own service account (operator.ts), with its
// fail-closed webhooks called by the cluster's API server, against an embedded central lease server on
// this machine. The other cluster of a cross-cluster singleton is played on the central API by a second
// holder (remote-holder.ts): two operators cannot share one cluster (each BerthLease controller and each
// pair of webhooks covers every namespace, and the central lease is keyed by the BerthLease's namespace),
// so the real two-operator failover is two-clusters.test.ts, which needs a second cluster. The Go
// operator's test scenarios (its numbers): 36 (Pods really run only while held; late Pods stay gated;
// CronJob Jobs are stopped and removed before the release), 24/25 (what admission refuses), 31 (no
// activation while not held), 41-43 and 46 (standby, failover, rejoin, deletion), 22 (CronJob cleanup).
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AdmissionMessage,
  MANAGED_LEASE,
  MANAGED_UID,
  SCHEDULING_GATE,
  STOP_FENCE,
} from '../../src/berth/api.ts';
import { findCondition } from '../../src/berth/status.ts';
import { type CentralServer, startCentralServer } from '../../src/central/server.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { centralTls } from '../helpers/central-tls.ts';
import { IN_SCOPE } from '../helpers/cluster.ts';
import { eventually } from '../helpers/eventually.ts';
import { E2eCluster, mergePatch, RUN_ID } from './cluster.ts';
import { type E2eTarget, e2eTarget, skipReason } from './env.ts';
import { E2eOperator } from './operator.ts';
import { RemoteHolder } from './remote-holder.ts';
import { isGated, isRunning, PodWatch, Timeline } from './timeline.ts';
import {
  createLease,
  cronJob,
  cronJobLease,
  deployment,
  deploymentLease,
  HEARTBEAT_S,
  leaseWhen,
  ownedPod,
  pods,
  readLease,
  rejection,
  TTL_S,
  until,
} from './workloads.ts';

const skip = skipReason('the managed-workload scenarios', ['kubeconfig', 'webhookHost']);

const PREFIX = `berth-e2e-${RUN_ID}`;
const NS = `${PREFIX}-apps`;
const CLUSTER_ID = 'e2e-east';
const REMOTE = 'e2e-west';
const REPLICAS = 2;
const DENIED = (webhook: 'mutate' | 'validate') =>
  `admission webhook "${webhook}-workloads.berth.skaphos.io" denied the request: `;

describe.skipIf(skip)('managed workloads on a real cluster', () => {
  let target: E2eTarget | undefined;
  let cluster: E2eCluster;
  let operator: E2eOperator;
  let central: CentralServer;
  const timeline = new Timeline();
  let watch: PodWatch | undefined;
  const remotes: RemoteHolder[] = [];

  const remote = (leaseName: string): RemoteHolder => {
    const r = new RemoteHolder({
      centralUrl: central.url,
      namespace: NS,
      leaseName,
      holder: REMOTE,
      ttlSeconds: TTL_S,
      heartbeatMs: HEARTBEAT_S * 1000,
    });
    remotes.push(r);
    return r;
  };
  const running = async (app: string): Promise<V1Pod[]> =>
    (await pods(cluster, NS, `app=${app}`)).filter(isRunning);

  beforeAll(async () => {
    target = await e2eTarget(1);
    cluster = new E2eCluster('east', target.kubeconfigs[0]!);
    await cluster.installCrd();
    await cluster.createNamespace(NS, IN_SCOPE);
    central = await startCentralServer({
      tls: await centralTls(),
      logger: createLogger({ level: 'silent' }),
    });
    operator = await E2eOperator.install(cluster, {
      prefix: PREFIX,
      appNamespaces: [NS],
      webhookHost: target.webhookHost,
    });
    cluster.onCleanup('operator', () => operator.stop());
    // First of all at cleanup: the running operator drains and releases what is left.
    cluster.onCleanup('BerthLeases', () => cluster.removeBerthLeases(NS));
    watch = new PodWatch(cluster, NS, timeline);
    await watch.start();
    await operator.start(CLUSTER_ID, central.url);
  });

  afterAll(async () => {
    for (const r of remotes) await r.close();
    const failed = (await cluster?.cleanup()) ?? [];
    await watch?.stop();
    await central?.stop();
    if (failed.length > 0) console.warn(`e2e cleanup left something behind:\n${failed.join('\n')}`);
    await target?.stop();
  });

  it('stamps a managed Deployment, creates its Pods gated and ungates them once this cluster holds the lease', async () => {
    const lease = await createLease(cluster, NS, 'web', deploymentLease('web', REPLICAS));
    await cluster.apps.createNamespacedDeployment({ namespace: NS, body: deployment('web') });

    const created = await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'web' });
    expect(created.metadata?.annotations).toMatchObject({
      [MANAGED_LEASE]: 'web',
      [MANAGED_UID]: lease.metadata.uid,
    });
    expect(created.metadata?.labels).toMatchObject({ [MANAGED_UID]: lease.metadata.uid });
    expect(created.spec?.template.spec?.schedulingGates).toEqual([{ name: SCHEDULING_GATE }]);

    const held = await leaseWhen(cluster, NS, 'web', (l) => l.status?.leaseState === 'held');
    expect(held.status).toMatchObject({
      currentHolder: CLUSTER_ID,
      workload: { phase: 'Active', targetUID: created.metadata?.uid },
    });
    expect(held.status?.fencingToken).toBeGreaterThan(0);
    expect(findCondition(held.status, 'Acquired')).toMatchObject({ status: 'True', reason: 'Held' });

    // The kubelet really runs them (Ready), and each was registered before its gate was lifted.
    const ready = await until(
      async () => {
        const list = await running('web');
        const allReady = list.every((p) =>
          p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
        );
        return list.length === REPLICAS && allReady && list;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    const registered = (await readLease(cluster, NS, 'web'))?.status?.workload?.pods ?? [];
    for (const pod of ready) {
      expect(isGated(pod)).toBe(false);
      expect(registered).toContainEqual({ name: pod.metadata?.name, uid: pod.metadata?.uid });
    }
    expect((await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'web' })).spec?.replicas).toBe(
      REPLICAS,
    );
    // Every Pod of it was gated when it first appeared.
    const births = timeline.select({ cluster: 'east', change: 'added', pod: /^web-/ });
    expect(births.length).toBeGreaterThanOrEqual(REPLICAS);
    expect(births.filter((e) => !e.gated)).toEqual([]);
  });

  it('admits only gated, unbound Pods and keeps the binding of the Deployment; unmanaged workloads are untouched', async () => {
    const web = await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'web' });
    const owner = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: web.metadata?.uid ?? '' };

    // A Pod prebound to a node would skip the gate: refused (through kubectl, as a user would meet it).
    // Mutating admission gates it, so the API server's own validation already refuses it, before the
    // validating webhook (which refuses it too when the gate is missing).
    const node = (await cluster.core.listNode()).items[0]?.metadata?.name ?? 'node';
    const prebound = await cluster.kubectl(
      ['create', '-n', NS, '-f', '-'],
      JSON.stringify({ apiVersion: 'v1', kind: 'Pod', ...ownedPod('prebound', owner, { nodeName: node }) }),
    );
    expect(prebound.code).not.toBe(0);
    expect(prebound.stderr).toContain(
      'spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared',
    );
    expect(await rejection(cluster.core.readNamespacedPod({ namespace: NS, name: 'prebound' }))).toContain(
      'not found',
    );

    // A Pod of the managed Deployment made by hand is stamped and gated, then registered and ungated by
    // the operator, since this cluster holds the lease.
    const extra = await cluster.core.createNamespacedPod({ namespace: NS, body: ownedPod('extra', owner) });
    expect(extra.spec?.schedulingGates).toEqual([{ name: SCHEDULING_GATE }]);
    expect(extra.metadata?.annotations).toMatchObject({ [MANAGED_LEASE]: 'web' });
    await eventually(
      async () => !isGated(await cluster.core.readNamespacedPod({ namespace: NS, name: 'extra' })),
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const registered = (await readLease(cluster, NS, 'web'))?.status?.workload?.pods ?? [];
    expect(registered).toContainEqual({ name: 'extra', uid: extra.metadata?.uid });
    await cluster.core.deleteNamespacedPod({ namespace: NS, name: 'extra', gracePeriodSeconds: 0 });

    // The Deployment cannot drop its binding nor the gate of its template.
    expect(
      await rejection(
        cluster.apps.patchNamespacedDeployment(
          { namespace: NS, name: 'web', body: { metadata: { annotations: { [MANAGED_LEASE]: null } } } },
          mergePatch,
        ),
      ),
    ).toBe(`${DENIED('validate')}${AdmissionMessage.bindingChanged}`);
    expect(
      await rejection(
        cluster.apps.patchNamespacedDeployment(
          { namespace: NS, name: 'web', body: { spec: { template: { spec: { schedulingGates: null } } } } },
          mergePatch,
        ),
      ),
    ).toBe(`${DENIED('validate')}${AdmissionMessage.gateRequired}`);

    // A Deployment no BerthLease targets runs as usual, ungated.
    await cluster.apps.createNamespacedDeployment({
      namespace: NS,
      body: { ...deployment('plain'), spec: { ...deployment('plain').spec!, replicas: 1 } },
    });
    const plain = await until(async () => (await running('plain'))[0], {
      timeoutMs: 120_000,
      intervalMs: 500,
    });
    expect(plain.spec?.schedulingGates ?? []).toEqual([]);
    expect(plain.metadata?.annotations?.[MANAGED_UID]).toBeUndefined();
    await cluster.apps.deleteNamespacedDeployment({ namespace: NS, name: 'plain' });
  });

  it('deleting the BerthLease stops and drains the Deployment before the lease is released', async () => {
    const before = await readLease(cluster, NS, 'web');
    const other = remote('web');
    other.keepAcquiring();
    // The other holder is refused while this cluster holds the lease.
    await eventually(
      () => other.last !== undefined && !other.last.acquired && other.last.holder === CLUSTER_ID,
      {
        timeoutMs: 10_000,
      },
    );
    const deletedAt = performance.now();
    await cluster.custom.deleteNamespacedCustomObject({
      group: 'berth.skaphos.io',
      version: 'v1alpha1',
      plural: 'berthleases',
      namespace: NS,
      name: 'web',
    });

    // The release comes only after the Pods are gone: once the other holder got the lease, none runs here.
    await eventually(() => other.heldSince !== undefined, { timeoutMs: 60_000, intervalMs: 100 });
    expect(await running('web')).toEqual([]);
    expect(other.last?.fencingToken).toBeGreaterThan(before?.status?.fencingToken ?? 0);
    const stopped = await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'web' });
    expect(stopped.spec?.replicas).toBe(0);
    expect(stopped.metadata?.annotations?.[STOP_FENCE]).toBeTruthy();
    await eventually(async () => (await readLease(cluster, NS, 'web')) === undefined, { timeoutMs: 30_000 });
    expect(timeline.select({ cluster: 'east', change: 'ungated', pod: /^web-/, since: deletedAt })).toEqual(
      [],
    );
    expect(
      timeline.select({ cluster: 'east', change: 'removed', pod: /^web-/, since: deletedAt }).length,
    ).toBeGreaterThanOrEqual(REPLICAS);
    await other.release();
  });

  it('runs a managed CronJob only while held; deleting its BerthLease suspends it and removes its Jobs and Pods first', async () => {
    const lease = await createLease(cluster, NS, 'nightly', cronJobLease('nightly'));
    await cluster.batch.createNamespacedCronJob({ namespace: NS, body: cronJob('nightly') });
    const cj = await cluster.batch.readNamespacedCronJob({ namespace: NS, name: 'nightly' });
    expect(cj.spec?.jobTemplate.spec?.template.spec?.schedulingGates).toEqual([{ name: SCHEDULING_GATE }]);
    await leaseWhen(cluster, NS, 'nightly', (l) => l.status?.leaseState === 'held');
    await eventually(
      async () =>
        (await cluster.batch.readNamespacedCronJob({ namespace: NS, name: 'nightly' })).spec?.suspend ===
        false,
      {
        timeoutMs: 30_000,
        intervalMs: 250,
      },
    );

    // The CronJob controller creates a Job at the next minute; its Pod is born gated and then ungated.
    const selector = `${MANAGED_UID}=${lease.metadata.uid}`;
    const job = await until(
      async () =>
        (await cluster.batch.listNamespacedJob({ namespace: NS, labelSelector: selector })).items[0],
      {
        timeoutMs: 90_000,
        intervalMs: 500,
      },
    );
    expect(job.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: 'CronJob',
      name: 'nightly',
      controller: true,
    });
    await eventually(
      () => timeline.select({ cluster: 'east', change: 'running', pod: /^nightly-/ }).length > 0,
      {
        timeoutMs: 120_000,
        intervalMs: 250,
      },
    );
    const births = timeline.select({ cluster: 'east', change: 'added', pod: /^nightly-/ });
    expect(births.length).toBeGreaterThan(0);
    expect(births.filter((e) => !e.gated)).toEqual([]);

    const other = remote('nightly');
    other.keepAcquiring();
    const deletedAt = performance.now();
    await cluster.custom.deleteNamespacedCustomObject({
      group: 'berth.skaphos.io',
      version: 'v1alpha1',
      plural: 'berthleases',
      namespace: NS,
      name: 'nightly',
    });
    await eventually(() => other.heldSince !== undefined, { timeoutMs: 60_000, intervalMs: 100 });
    // Released only after the Jobs were suspended and deleted and their Pods were gone.
    expect((await cluster.batch.listNamespacedJob({ namespace: NS, labelSelector: selector })).items).toEqual(
      [],
    );
    expect(await running('nightly')).toEqual([]);
    const suspended = await cluster.batch.readNamespacedCronJob({ namespace: NS, name: 'nightly' });
    expect(suspended.spec?.suspend).toBe(true);
    expect(suspended.metadata?.annotations?.[STOP_FENCE]).toBeTruthy();
    expect(
      timeline.select({ cluster: 'east', change: 'ungated', pod: /^nightly-/, since: deletedAt }),
    ).toEqual([]);
    await eventually(async () => (await readLease(cluster, NS, 'nightly')) === undefined, {
      timeoutMs: 30_000,
    });

    // A late Job of the CronJob, made as its controller makes them (from the stamped jobTemplate), once
    // the BerthLease is gone: refused rather than run unmanaged.
    const template = suspended.spec?.jobTemplate;
    const late = await rejection(
      cluster.batch.createNamespacedJob({
        namespace: NS,
        body: {
          metadata: {
            ...template?.metadata,
            name: 'nightly-late',
            ownerReferences: [
              {
                apiVersion: 'batch/v1',
                kind: 'CronJob',
                name: 'nightly',
                uid: cj.metadata?.uid ?? '',
                controller: true,
              },
            ],
          },
          spec: template?.spec,
        },
      }),
    );
    expect(late).toBe(`${DENIED('mutate')}${AdmissionMessage.noLiveLease}`);
    await other.release();
  });

  // Last: stopping the operator hands over every managed workload this cluster runs.
  it('stands by while another cluster holds the lease, takes over on its expiry, hands over when its operator stops and rejoins as standby', async () => {
    const other = remote('api');
    other.keepAcquiring();
    await eventually(() => other.heldSince !== undefined, { timeoutMs: 10_000 });
    await createLease(cluster, NS, 'api', deploymentLease('api', REPLICAS));
    await cluster.apps.createNamespacedDeployment({ namespace: NS, body: deployment('api') });
    const api = await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'api' });

    // 1. Standby: the lease shows the other holder, the target stays at 0 and cannot be scaled up.
    await leaseWhen(
      cluster,
      NS,
      'api',
      (l) => l.status?.leaseState === 'waiting' && l.status.currentHolder === REMOTE,
    );
    expect(api.spec?.replicas).toBe(0);
    expect(
      await rejection(
        cluster.apps.patchNamespacedDeployment(
          { namespace: NS, name: 'api', body: { spec: { replicas: 2 } } },
          mergePatch,
        ),
      ),
    ).toBe(`${DENIED('validate')}${AdmissionMessage.activationNotAuthorized}`);

    // A Pod created meanwhile stays gated: nobody but the operator may ungate it, and the operator does not.
    const owner = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'api', uid: api.metadata?.uid ?? '' };
    const late = await cluster.core.createNamespacedPod({ namespace: NS, body: ownedPod('api-late', owner) });
    expect(late.spec?.schedulingGates).toEqual([{ name: SCHEDULING_GATE }]);
    const ungate = await cluster.kubectl([
      'patch',
      'pod',
      'api-late',
      '-n',
      NS,
      '--type=merge',
      '-p',
      '{"spec":{"schedulingGates":null}}',
    ]);
    expect(ungate.code).not.toBe(0);
    expect(ungate.stderr).toContain(`${DENIED('validate')}${AdmissionMessage.onlyOperatorUngates}`);
    const beats = other.heartbeats;
    await eventually(() => other.heartbeats >= beats + 2, { timeoutMs: 5 * HEARTBEAT_S * 1000 });
    const stillLate = await cluster.core.readNamespacedPod({ namespace: NS, name: 'api-late' });
    expect(stillLate.spec?.schedulingGates).toEqual([{ name: SCHEDULING_GATE }]);
    expect(stillLate.spec?.nodeName).toBeUndefined();
    expect((await readLease(cluster, NS, 'api'))?.status?.workload?.pods ?? []).toEqual([]);
    await cluster.core.deleteNamespacedPod({ namespace: NS, name: 'api-late', gracePeriodSeconds: 0 });

    // 2. The other cluster goes silent: once its lease expired this cluster takes over with a newer token.
    const remoteToken = other.last?.fencingToken ?? 0;
    await other.crash();
    const held = await leaseWhen(cluster, NS, 'api', (l) => l.status?.leaseState === 'held', {
      timeoutMs: (TTL_S + 30) * 1000,
      intervalMs: 250,
    });
    expect(held.status?.currentHolder).toBe(CLUSTER_ID);
    expect(held.status?.fencingToken).toBeGreaterThan(remoteToken);
    await eventually(async () => (await running('api')).length === REPLICAS, {
      timeoutMs: 120_000,
      intervalMs: 500,
    });

    // 3. This cluster's operator stops (SIGTERM): it drains and releases, then the other cluster gets the
    //    lease without waiting for the TTL; by then nothing of it runs here.
    other.keepAcquiring();
    const stoppedAt = performance.now();
    expect(await operator.stop()).toBe(0);
    await eventually(() => other.heldSince !== undefined, { timeoutMs: 60_000, intervalMs: 100 });
    expect(await running('api')).toEqual([]);
    expect((await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'api' })).spec?.replicas).toBe(
      0,
    );
    const handedOver = await readLease(cluster, NS, 'api');
    expect(handedOver?.status).toMatchObject({ leaseState: 'waiting', fencingToken: 0 });
    expect(findCondition(handedOver?.status, 'Acquired')?.reason).toBe('Stopped');
    expect(timeline.select({ cluster: 'east', change: 'ungated', pod: /^api-/, since: stoppedAt })).toEqual(
      [],
    );

    // 4. The operator comes back as a standby behind the other holder; nothing starts here.
    await operator.start(CLUSTER_ID, central.url);
    await leaseWhen(
      cluster,
      NS,
      'api',
      (l) => l.status?.leaseState === 'waiting' && l.status.currentHolder === REMOTE,
    );
    expect(await running('api')).toEqual([]);
    expect((await cluster.apps.readNamespacedDeployment({ namespace: NS, name: 'api' })).spec?.replicas).toBe(
      0,
    );
    await other.release();
  });
});
