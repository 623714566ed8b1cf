// Two clusters, each a control plane of its own set up as the install does (CRD, namespaces, the
// install's RBAC, the webhook configurations naming the webhook Service), each running `berth-operator run`
// in-process as its service account, and one embedded central lease server: the managed Deployment runs
// in exactly one cluster at every instant, as both clusters' Pod watches see it.
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rbacLayers } from '../../../scripts/deploy-rbac.ts';
import { type BerthLease, GROUP, PLURAL, VERSION } from '../../../src/berth/api.ts';
import { parseBerthLease } from '../../../src/berth/leaseio.ts';
import { findCondition } from '../../../src/berth/status.ts';
import { parseFlags } from '../../../src/cli.ts';
import { parseRunConfig } from '../../../src/config.ts';
import { parseFeatureConfigs } from '../../../src/features.ts';
import { KubeTransport } from '../../../src/kube/client.ts';
import { Informer } from '../../../src/kube/informer.ts';
import type { Manager } from '../../../src/kube/manager.ts';
import { buildOperator, runCommand } from '../../../src/run.ts';
import {
  DEFAULT_CONFIGURATION_NAME,
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
} from '../../../webhooks/configurations.ts';
import { type ServiceAccountUser, type ServiceRoute, TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { Timeline } from '../../helpers/timeline.ts';
import { type Central, startCentral } from '../berth/harness.ts';
import {
  appDeployment,
  deploymentLease,
  GATE,
  NS,
  OPERATOR_NS,
  OPERATOR_USER,
  rejection,
  SERVICE_ACCOUNT,
  silent,
  until,
  VALIDATE_DENIED,
  WEBHOOK_SERVICE,
} from './harness.ts';

const TTL_S = 3;
const HEARTBEAT_S = 1;
const REPLICAS = 2;
const LEASE = 'singleton';
const APP = 'app';
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface RunningOperator {
  manager: Manager;
  stop(): Promise<number>;
}

class Cluster {
  readonly name: string;
  readonly t: TestCluster;
  readonly custom: CustomObjectsApi;
  readonly apps: AppsV1Api;
  readonly core: CoreV1Api;
  operator: RunningOperator | undefined;
  readonly #account: ServiceAccountUser;
  #webhookRoute: ServiceRoute | undefined;
  readonly #watch: Informer<KubernetesObject>;
  readonly #transport: KubeTransport;
  readonly #stopWatch = new AbortController();

  private constructor(name: string, t: TestCluster, account: ServiceAccountUser, timeline: Timeline) {
    this.name = name;
    this.t = t;
    this.#account = account;
    this.custom = t.kc.makeApiClient(CustomObjectsApi);
    this.apps = t.kc.makeApiClient(AppsV1Api);
    this.core = t.kc.makeApiClient(CoreV1Api);
    this.#transport = new KubeTransport(t.kc);
    this.#watch = new Informer<KubernetesObject>({
      name: `timeline-${name}`,
      transport: this.#transport,
      resource: { version: 'v1', plural: 'pods', namespace: NS },
    });
    const key = (p: KubernetesObject) => [p.metadata?.name ?? '', p.metadata?.uid ?? ''] as const;
    this.#watch.addEventHandler({
      onAdd: (p) => timeline.observe(name, ...key(p), p as V1Pod),
      onUpdate: (_old, p) => timeline.observe(name, ...key(p), p as V1Pod),
      onDelete: (p) => timeline.observe(name, ...key(p), undefined),
    });
  }

  /**
   * A control plane of its own set up as the install does: CRD, namespaces, the install's RBAC (base and
   * self-signed layers) for the operator's account, the webhook configurations (their CA left to the
   * operator). The webhook Service is routed to the operator once it listens.
   */
  static async start(name: string, timeline: Timeline): Promise<Cluster> {
    const t = await TestCluster.own();
    await t.installBerthLeaseCrd();
    for (const ns of [NS, OPERATOR_NS]) await t.createNamespace(ns);
    const objects = KubernetesObjectApi.makeApiClient(t.kc);
    const rbac = rbacLayers();
    for (const o of [...rbac.base.objects, ...rbac.selfSigned.objects]) await objects.create(o);
    const account = await t.serviceAccount(OPERATOR_NS, SERVICE_ACCOUNT);
    const cluster = new Cluster(name, t, account, timeline);
    const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
    const params = { namespace: OPERATOR_NS, serviceName: WEBHOOK_SERVICE };
    await admission.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(params) });
    await admission.createValidatingWebhookConfiguration({ body: validatingWebhookConfiguration(params) });
    cluster.#watch.start(cluster.#stopWatch.signal);
    await cluster.#watch.waitForSync();
    return cluster;
  }

  ref(namespace = NS): { group: string; version: string; plural: string; namespace: string } {
    return { group: GROUP, version: VERSION, plural: PLURAL, namespace };
  }

  /** `berth-operator run` in-process, as its service account, with the flags a deployment would pass. */
  async startOperator(clusterId: string, centralUrl: string): Promise<void> {
    const flags = parseFlags(runCommand, [
      `--namespace=${OPERATOR_NS}`,
      `--berth-api-server=${centralUrl}`,
      `--cluster-id=${clusterId}`,
      '--enable-workload-admission',
      `--workload-operator-user=${OPERATOR_USER}`,
      `--workload-operator-namespace=${OPERATOR_NS}`,
      `--webhook-service-name=${WEBHOOK_SERVICE}`,
      '--webhook-port=0',
      '--health-probe-bind-address=0',
      '--metrics-bind-address=0',
      '--drain-window=0s',
      '--graceful-shutdown-timeout=30s',
      '--node-taint-guard=false',
    ]);
    const config = parseRunConfig(flags);
    const features = parseFeatureConfigs(flags, OPERATOR_NS);
    let ready!: () => void;
    const isReady = new Promise<void>((resolve) => {
      ready = resolve;
    });
    let routed: Promise<void> | undefined;
    const { manager } = buildOperator(config, {
      kubeConfig: this.t.kubeConfigFor(this.#account.kubeconfig),
      namespace: OPERATOR_NS,
      logger: silent(),
      features,
      onWebhookListening: (port) => {
        routed = this.#routeWebhook(port);
        routed.catch(() => {}); // awaited below
      },
      onLifecycle: (e) => {
        if (e.step === 'ready') ready();
      },
    });
    const done = manager.run();
    await isReady;
    await manager.elected;
    await routed;
    // Admission works once the operator has put its CA into both configurations and kube-apiserver
    // trusts it (until then a Pod creation fails closed: the webhook's certificate is unknown).
    const admission = this.t.kc.makeApiClient(AdmissionregistrationV1Api);
    await eventually(async () => {
      const m = await admission.readMutatingWebhookConfiguration({ name: DEFAULT_CONFIGURATION_NAME });
      const v = await admission.readValidatingWebhookConfiguration({ name: DEFAULT_CONFIGURATION_NAME });
      return !!m.webhooks?.[0]?.clientConfig.caBundle && !!v.webhooks?.[0]?.clientConfig.caBundle;
    });
    await eventually(
      () =>
        this.core.createNamespacedPod({
          namespace: NS,
          dryRun: 'All',
          body: {
            metadata: { generateName: 'admission-probe-' },
            spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
          },
        }),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    let stopping: Promise<number> | undefined;
    this.operator = {
      manager,
      stop: () => {
        stopping ??= (async () => {
          manager.stop('test');
          const result = await done;
          await this.#webhookRoute?.remove();
          return result.exitCode;
        })();
        return stopping;
      },
    };
  }

  /** The webhook Service's endpoint: this machine, the operator's port. */
  async #routeWebhook(port: number): Promise<void> {
    const endpoints = [{ port }];
    if (this.#webhookRoute) await this.#webhookRoute.update(endpoints);
    else this.#webhookRoute = await this.t.routeService(OPERATOR_NS, WEBHOOK_SERVICE, endpoints);
  }

  async stopOperator(): Promise<number> {
    const code = (await this.operator?.stop()) ?? 0;
    this.operator = undefined;
    return code;
  }

  async createLease(name: string, namespace = NS): Promise<void> {
    const spec = deploymentLease(APP, REPLICAS, {
      leaseName: LEASE,
      ttlSeconds: TTL_S,
      heartbeatIntervalSeconds: HEARTBEAT_S,
    });
    await this.custom.createNamespacedCustomObject({
      ...this.ref(namespace),
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'BerthLease', metadata: { name }, spec },
    });
  }

  async lease(name: string, namespace = NS): Promise<BerthLease> {
    return parseBerthLease(await this.custom.getNamespacedCustomObject({ ...this.ref(namespace), name }));
  }

  async stop(): Promise<void> {
    await this.stopOperator();
    this.#stopWatch.abort();
    await this.#watch.stop();
    await this.#transport.close();
    await this.t.stop();
  }
}

const timeline = new Timeline();
let central: Central;
const clusters = new Map<string, Cluster>();
const idOf = (name: string): string => `cluster-${name}`;
const clusterOf = (name: string): Cluster => {
  const c = clusters.get(name);
  if (c === undefined) throw new Error(`no cluster ${name}`);
  return c;
};
const otherOf = (name: string): string => (name === 'east' ? 'west' : 'east');

beforeAll(async () => {
  central = await startCentral();
  const [east, west] = await Promise.all([Cluster.start('east', timeline), Cluster.start('west', timeline)]);
  clusters.set('east', east);
  clusters.set('west', west);
  await Promise.all([
    east.startOperator(idOf('east'), central.url),
    west.startOperator(idOf('west'), central.url),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all([...clusters.values()].map((c) => c.stop()));
  await central?.stop();
});

const measured: Record<string, number> = {};

describe('a managed Deployment guarded by one BerthLease in two clusters', () => {
  it('runs its replicas in exactly one cluster at every instant, through a hand-over', async () => {
    const t0 = performance.now();
    for (const c of clusters.values()) {
      await c.createLease(LEASE);
      await c.apps.createNamespacedDeployment({ namespace: NS, body: appDeployment(APP, 0) });
    }

    // 1. Exactly one cluster runs the replicas; the other shows it as the holder and runs none.
    const holder = await until(() => timeline.soleRunner(REPLICAS), { timeoutMs: 20_000, intervalMs: 10 });
    measured.firstRunningMs = performance.now() - t0;
    const standby = otherOf(holder);
    await eventually(
      async () => {
        const s = (await clusterOf(standby).lease(LEASE)).status;
        return s?.leaseState === 'waiting' && s.currentHolder === idOf(holder);
      },
      { timeoutMs: 5_000 },
    );
    const holderLease = await clusterOf(holder).lease(LEASE);
    expect(holderLease.status?.workload?.pods).toHaveLength(REPLICAS);

    // 2. In the standby: a Pod created while the lease is held elsewhere stays gated; scaling up is refused.
    const standbyCluster = clusterOf(standby);
    const deployment = await standbyCluster.apps.readNamespacedDeployment({ namespace: NS, name: APP });
    const late = await standbyCluster.core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: {
          name: 'late',
          labels: { app: APP },
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              name: APP,
              uid: deployment.metadata?.uid ?? '',
              controller: true,
            },
          ],
        },
        spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
      },
    });
    expect(late.spec?.schedulingGates).toEqual([{ name: GATE }]);
    expect(
      await rejection(
        standbyCluster.apps.patchNamespacedDeployment(
          { namespace: NS, name: APP, body: { spec: { replicas: 2 } } },
          merge,
        ),
      ),
    ).toBe(`${VALIDATE_DENIED}lease does not authorize workload activation`);
    expect(
      await rejection(
        standbyCluster.core.patchNamespacedPod(
          { namespace: NS, name: 'late', body: { spec: { schedulingGates: null } } },
          merge,
        ),
      ),
    ).toBe(`${VALIDATE_DENIED}only the operator may remove the Berth scheduling gate`);
    // Three heartbeats later it is still gated, unbound, and the lease still waits.
    const heldSince = performance.now();
    await eventually(() => performance.now() - heldSince >= 3 * HEARTBEAT_S * 1000, {
      timeoutMs: 5_000,
      intervalMs: 100,
    });
    const stillLate = await standbyCluster.core.readNamespacedPod({ namespace: NS, name: 'late' });
    expect(stillLate.spec?.schedulingGates).toEqual([{ name: GATE }]);
    expect(stillLate.spec?.nodeName).toBeUndefined();
    expect(timeline.first(standby, 'ungated')).toBeUndefined();
    expect((await standbyCluster.lease(LEASE)).status?.workload?.pods).toBeUndefined();
    await standbyCluster.core.deleteNamespacedPod({ namespace: NS, name: 'late', gracePeriodSeconds: 0 });

    // 3. Stop the holder's operator: its Pods are drained and the lease released before the other
    //    cluster's Pods are ungated.
    const stoppedAt = performance.now();
    expect(await clusterOf(holder).stopOperator()).toBe(0);
    const stoppedOperatorMs = performance.now() - stoppedAt;
    const next = await until(() => (timeline.soleRunner(REPLICAS) === standby ? standby : undefined), {
      timeoutMs: 15_000,
      intervalMs: 10,
    });
    // A Pod that ran stops when it is removed (a terminating Pod still runs). Not every removal: the real
    // ReplicaSet controller may replace a drained Pod before the Deployment controller scales it down, and
    // that replacement, born gated and never registered, never runs and may go after the release.
    const lastStopped = timeline.last(holder, 'stopped', stoppedAt);
    const firstUngated = timeline.first(next, 'ungated', stoppedAt);
    const firstRunning = timeline.first(next, 'running', stoppedAt);
    expect(lastStopped && firstUngated && firstRunning).toBeTruthy();
    expect(lastStopped?.at ?? Number.POSITIVE_INFINITY).toBeLessThan(firstUngated?.at ?? 0);
    measured.drainedMs = (lastStopped?.at ?? 0) - stoppedAt;
    measured.operatorStopMs = stoppedOperatorMs;
    measured.otherUngatedMs = (firstUngated?.at ?? 0) - stoppedAt;
    measured.otherRunningMs = (firstRunning?.at ?? 0) - stoppedAt;
    measured.gapMs = (firstUngated?.at ?? 0) - (lastStopped?.at ?? 0);
    // Released, not expired: the other cluster did not wait for the TTL.
    expect(measured.otherRunningMs).toBeLessThan(TTL_S * 1000 + 2_000);
    const released = await clusterOf(holder).lease(LEASE);
    expect(released.status).toMatchObject({ leaseState: 'waiting', fencingToken: 0 });
    expect(findCondition(released.status, 'Acquired')?.reason).toBe('Stopped');
    expect(
      (await clusterOf(holder).apps.readNamespacedDeployment({ namespace: NS, name: APP })).spec?.replicas,
    ).toBe(0);

    // 4. The stopped operator comes back: a standby behind the new holder, its cluster runs nothing.
    await clusterOf(holder).startOperator(idOf(holder), central.url);
    await eventually(
      async () => {
        const s = (await clusterOf(holder).lease(LEASE)).status;
        return s?.leaseState === 'waiting' && s.currentHolder === idOf(next);
      },
      { timeoutMs: 5_000 },
    );
    expect(timeline.soleRunner(REPLICAS)).toBe(next);

    // 5. A lease in the operator namespace is refused, with the exact message.
    await clusterOf('east').createLease('in-operator-namespace', OPERATOR_NS);
    const refused = await until(
      async () => {
        const c = findCondition(
          (await clusterOf('east').lease('in-operator-namespace', OPERATOR_NS)).status,
          'Acquired',
        );
        return c?.reason === 'AdmissionRequired' ? c : undefined;
      },
      { timeoutMs: 5_000 },
    );
    expect(refused).toMatchObject({
      status: 'False',
      message: 'workloads cannot be managed in the operator namespace',
    });

    // Never two clusters running replicas at once, over the whole run.
    expect(timeline.violations).toEqual([]);
    const gates = timeline.gateLatencies();
    expect(gates.length).toBeGreaterThanOrEqual(2 * REPLICAS);
    console.info(
      `managed e2e (ttl ${TTL_S}s, heartbeat ${HEARTBEAT_S}s, ${REPLICAS} replicas): ${timeline.events.length} Pod events; ` +
        `first replicas running after ${measured.firstRunningMs?.toFixed(0)}ms; on stopping the holder's operator: ` +
        `its Pods drained after ${measured.drainedMs?.toFixed(0)}ms (operator stopped after ${measured.operatorStopMs?.toFixed(0)}ms), ` +
        `the other cluster's first Pod ungated after ${measured.otherUngatedMs?.toFixed(0)}ms ` +
        `(${measured.gapMs?.toFixed(0)}ms after the last drained Pod was gone), running after ${measured.otherRunningMs?.toFixed(0)}ms; ` +
        `gate removal (creation to ungate, watch-observed) ${gates.map((g) => g.toFixed(0)).join('/')}ms`,
    );
  }, 120_000);
});
