// The managed-workload path on a control plane of its own: the BerthLease CRD, the lease and operator
// namespaces, the operator's least-privilege RBAC and service account, and the operator's real
// WorkloadAdmission (an HTTPS server in this process) behind the install's fail-closed webhook
// configurations, which name the webhook Service: kube-apiserver reaches the server through
// TestCluster.routeService. The configurations are cluster-wide with fixed names and the controllers
// reconcile every namespace, so each file starts a cluster of its own. The operator (its controllers and
// the webhook's client) talks to the API server through an ApiProxy, so that a test can fail or count its
// requests.
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  type EventsV1Event,
  type KubeConfig,
  RbacAuthorizationV1Api,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { createAuthority } from '../../../hack/controlplane/pki.ts';
import { type BerthLease, type BerthLeaseSpec, GROUP, PLURAL, VERSION } from '../../../src/berth/api.ts';
import { BerthLeaseController } from '../../../src/berth/controller.ts';
import { HttpLeaseClient, type LeaseClient } from '../../../src/berth/leaseclient.ts';
import { parseBerthLease } from '../../../src/berth/leaseio.ts';
import { ManagedWorkloads } from '../../../src/berth/managed-workloads.ts';
import { NamespaceScope } from '../../../src/berth/namespace-scope.ts';
import { berthLeaseRbacObjects } from '../../../src/berth/rbac.ts';
import { isConflict } from '../../../src/kube/client.ts';
import { type Clock, realClock } from '../../../src/kube/clock.ts';
import { EventRecorder, eventSinkFor } from '../../../src/kube/events.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { createLogger, type Logger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import {
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
} from '../../../webhooks/configurations.ts';
import { kubeAdmissionIO } from '../../../webhooks/kube-io.ts';
import { ScopeExit } from '../../../webhooks/scope-exit.ts';
import { AdmissionServer } from '../../../webhooks/server.ts';
import { kubeWorkloadAdmission } from '../../../webhooks/workload-admission.ts';
import { SwappableCertificates } from '../../fixtures/webhooks/certs.ts';
import { untilAdmissionServed } from '../../helpers/admission-probe.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { IN_SCOPE, type ServiceAccountUser, type ServiceRoute, TestCluster } from '../../helpers/cluster.ts';
import { type EventuallyOptions, eventually } from '../../helpers/eventually.ts';
import { RecordingLeaseClient, reconcileContext, sumMetric } from '../berth/harness.ts';

export const NS = 'team-a';
export const OPERATOR_NS = 'berth-system';
export const SERVICE_ACCOUNT = 'berth-operator';
export const OPERATOR_USER = `system:serviceaccount:${OPERATOR_NS}:${SERVICE_ACCOUNT}`;
export const WEBHOOK_SERVICE = 'berth-operator-webhook';
export const GATE = 'berth.skaphos.io/lease-held';
export const MANAGED_UID = 'berth.skaphos.io/managed-lease-uid';
export const MANAGED_LEASE = 'berth.skaphos.io/managed-lease';
export const STOP_FENCE = 'berth.skaphos.io/stop-fence';
export const VALIDATE_DENIED = 'admission webhook "validate-workloads.berth.skaphos.io" denied the request: ';
export const MUTATE_DENIED = 'admission webhook "mutate-workloads.berth.skaphos.io" denied the request: ';

export const silent = (): Logger => createLogger({ level: process.env.BERTH_TEST_LOGS ? 'debug' : 'silent' });

/** A managed Deployment lease: scale to `replicas` while held, to 0 on release. */
export const deploymentLease = (
  target: string,
  replicas: number,
  over: Partial<BerthLeaseSpec> = {},
): BerthLeaseSpec => ({
  leaseName: target,
  holderIdentity: 'unused-with-cluster-id',
  ttlSeconds: 30,
  heartbeatIntervalSeconds: 10,
  semantics: 'at-most-once',
  target: { apiVersion: 'apps/v1', kind: 'Deployment', name: target },
  acquireAction: { scale: { replicas } },
  releaseAction: { scale: { replicas: 0 } },
  ...over,
});

/** `eventually` for a probe that yields a value once ready (undefined or false until then). */
export async function until<T>(
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  opts: EventuallyOptions = {},
): Promise<T> {
  const value = await eventually(probe, opts);
  if (value === undefined || value === false) throw new Error('until: no value');
  return value;
}

export { rejection } from '../../helpers/rejection.ts';

import { whenSettled } from '../../helpers/rejection.ts';

/** A Deployment of `replicas` whose Pods carry `app=<name>`. */
export const appDeployment = (name: string, replicas: number): V1Deployment => ({
  metadata: { name },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
    },
  },
});

export const isGated = (pod: V1Pod): boolean =>
  (pod.spec?.schedulingGates ?? []).some((g) => g.name === GATE);
export const isRunning = (pod: V1Pod): boolean =>
  !!pod.spec?.nodeName && pod.status?.phase !== 'Succeeded' && pod.status?.phase !== 'Failed';

export class ManagedCluster {
  readonly t: TestCluster;
  /** In front of kube-apiserver for the operator's clients (controllers and webhook): faults, counts. */
  readonly proxy: ApiProxy;
  readonly name: string;
  readonly custom: CustomObjectsApi;
  readonly apps: AppsV1Api;
  readonly batch: BatchV1Api;
  readonly core: CoreV1Api;
  readonly events: EventsV1Api;
  readonly #operator: ServiceAccountUser;
  #server: AdmissionServer | undefined;
  #admissionTransport: KubeTransport | undefined;
  #scope: NamespaceScope | undefined;
  #route: ServiceRoute | undefined;
  #caBundle: string | undefined;
  readonly admissionRegistry: Registry = createRegistry({ defaultMetrics: false });

  private constructor(t: TestCluster, proxy: ApiProxy, operator: ServiceAccountUser, name: string) {
    this.t = t;
    this.proxy = proxy;
    this.#operator = operator;
    this.name = name;
    this.custom = t.kc.makeApiClient(CustomObjectsApi);
    this.apps = t.kc.makeApiClient(AppsV1Api);
    this.batch = t.kc.makeApiClient(BatchV1Api);
    this.core = t.kc.makeApiClient(CoreV1Api);
    this.events = t.kc.makeApiClient(EventsV1Api);
  }

  /** A control plane of its own set up as above, admission served (call in beforeAll, once per file). */
  static async start(name: string): Promise<ManagedCluster> {
    const t = await TestCluster.own();
    let proxy: ApiProxy | undefined;
    let cluster: ManagedCluster | undefined;
    try {
      proxy = await ApiProxy.start(t);
      await t.installBerthLeaseCrd();
      await t.createNamespace(NS, IN_SCOPE);
      await t.createNamespace(OPERATOR_NS);
      const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
      const [role, binding] = berthLeaseRbacObjects({
        name: 'berth-operator',
        serviceAccount: { namespace: OPERATOR_NS, name: SERVICE_ACCOUNT },
        managedWorkloads: true,
        admissionScope: true,
      });
      await rbac.createClusterRole({ body: role });
      await rbac.createClusterRoleBinding({ body: binding });
      const operator = await t.serviceAccount(OPERATOR_NS, SERVICE_ACCOUNT);
      cluster = new ManagedCluster(t, proxy, operator, name);
      await cluster.startWebhooks();
      return cluster;
    } catch (err) {
      if (cluster) await cluster.stop();
      else {
        await proxy?.stop();
        await t.stop();
      }
      throw err;
    }
  }

  /**
   * The operator's WorkloadAdmission, as its service account, behind the fail-closed configurations
   * (created the first time), listening on every address for the Service's EndpointSlice. Returns once
   * kube-apiserver calls both webhooks.
   */
  async startWebhooks(): Promise<void> {
    const ca = await createAuthority('berth-webhook-ca');
    const pair = await ca.serving([`${WEBHOOK_SERVICE}.${OPERATOR_NS}.svc`]);
    this.#admissionTransport = new KubeTransport(this.operatorKubeConfig());
    // The webhook replica's own view of the scope, as every replica of `run` keeps it.
    this.#scope?.informer.stop();
    this.#scope = new NamespaceScope({ transport: this.#admissionTransport });
    this.#scope.informer.start();
    await this.#scope.informer.waitForSync();
    const handlers = kubeWorkloadAdmission({
      transport: this.#admissionTransport,
      operatorUser: OPERATOR_USER,
      scope: 'opt-in',
      scopeEntries: this.#scope,
      registry: this.admissionRegistry,
    });
    this.#server = new AdmissionServer({
      port: 0,
      certificates: new SwappableCertificates({ ...pair, ca: ca.cert }),
      handlers,
      registry: this.admissionRegistry,
    });
    await this.#server.start();
    const endpoints = [{ port: this.#server.port }];
    if (this.#route) await this.#route.update(endpoints);
    else this.#route = await this.t.routeService(OPERATOR_NS, WEBHOOK_SERVICE, endpoints);
    const configs = this.t.kc.makeApiClient(AdmissionregistrationV1Api);
    const params = {
      namespace: OPERATOR_NS,
      serviceName: WEBHOOK_SERVICE,
      caBundle: Buffer.from(ca.cert).toString('base64'),
      scope: 'opt-in',
    } as const;
    const mutating = mutatingWebhookConfiguration(params);
    const validating = validatingWebhookConfiguration(params);
    const name = mutating.metadata?.name ?? '';
    if (this.#caBundle === undefined) {
      await configs.createMutatingWebhookConfiguration({ body: mutating });
      await configs.createValidatingWebhookConfiguration({ body: validating });
    } else {
      // A new CA: the same configurations, trusting it.
      const m = await configs.readMutatingWebhookConfiguration({ name });
      const v = await configs.readValidatingWebhookConfiguration({ name });
      const resourceVersion = (o: { metadata?: { resourceVersion?: string } }) => o.metadata?.resourceVersion;
      await configs.replaceMutatingWebhookConfiguration({
        name,
        body: { ...mutating, metadata: { ...mutating.metadata, resourceVersion: resourceVersion(m) } },
      });
      await configs.replaceValidatingWebhookConfiguration({
        name,
        body: { ...validating, metadata: { ...validating.metadata, resourceVersion: resourceVersion(v) } },
      });
    }
    this.#caBundle = params.caBundle;
    await untilAdmissionServed(this.core, NS, this.admissionRegistry);
  }

  ref(): { group: string; version: string; plural: string; namespace: string } {
    return { group: GROUP, version: VERSION, plural: PLURAL, namespace: NS };
  }

  /** The operator's service account, through the proxy. */
  operatorKubeConfig(): KubeConfig {
    return this.t.kubeConfigFor(this.proxy.kubeconfigFor(this.#operator.kubeconfig));
  }

  /** `finalizers`: created with them, as if a reconcile had already added the operator's. */
  async createLease(
    name: string,
    spec: BerthLeaseSpec,
    namespace = NS,
    finalizers: string[] = [],
  ): Promise<BerthLease> {
    const metadata = { name, ...(finalizers.length > 0 ? { finalizers } : {}) };
    const body = { apiVersion: `${GROUP}/${VERSION}`, kind: 'BerthLease', metadata, spec };
    return parseBerthLease(
      await whenSettled(() => this.custom.createNamespacedCustomObject({ ...this.ref(), namespace, body })),
    );
  }

  async lease(name: string, namespace = NS): Promise<BerthLease | undefined> {
    try {
      return parseBerthLease(await this.custom.getNamespacedCustomObject({ ...this.ref(), namespace, name }));
    } catch (err) {
      if ((err as { code?: number }).code === 404) return undefined;
      throw err;
    }
  }

  async mustLease(name: string, namespace = NS): Promise<BerthLease> {
    const lease = await this.lease(name, namespace);
    if (lease === undefined) throw new Error(`BerthLease ${namespace}/${name} not found in ${this.name}`);
    return lease;
  }

  async deleteLease(name: string, namespace = NS): Promise<void> {
    await this.custom.deleteNamespacedCustomObject({ ...this.ref(), namespace, name });
  }

  /** A Deployment (replicas as given) whose Pods carry `app=<name>`. */
  async createDeployment(name: string, replicas: number, namespace = NS): Promise<void> {
    await this.apps.createNamespacedDeployment({ namespace, body: appDeployment(name, replicas) });
  }

  async replicas(name: string): Promise<number | undefined> {
    return (await this.apps.readNamespacedDeployment({ namespace: NS, name })).spec?.replicas;
  }

  async pods(labelSelector: string, namespace = NS): Promise<V1Pod[]> {
    return (await this.core.listNamespacedPod({ namespace, labelSelector })).items;
  }

  /** Events about a BerthLease, oldest first. */
  async leaseEvents(name: string): Promise<EventsV1Event[]> {
    const list = await this.events.listNamespacedEvent({ namespace: NS });
    return list.items
      .filter((e) => e.regarding?.kind === 'BerthLease' && e.regarding.name === name)
      .sort((a, b) => String(a.eventTime).localeCompare(String(b.eventTime)));
  }

  /**
   * Counts the operator's writes (update, patch) to a resource from now on, at the proxy: a fault rule
   * that neither fails nor delays is only counted.
   */
  countOperatorWrites(resource: string, subresource?: string): () => number {
    const handle = this.proxy.inject({
      verbs: ['update', 'patch'],
      resource,
      ...(subresource === undefined ? {} : { subresource }),
      user: OPERATOR_USER,
    });
    return () => handle.hits();
  }

  async stopWebhooks(): Promise<void> {
    await this.#server?.close();
    this.#server = undefined;
    await this.#scope?.informer.stop();
    this.#scope = undefined;
    await this.#admissionTransport?.close();
    this.#admissionTransport = undefined;
  }

  async stop(): Promise<void> {
    await this.stopWebhooks();
    await this.proxy.stop();
    await this.t.stop();
  }
}

export interface ManagedOperatorOptions {
  clusterId: string;
  centralUrl: string;
  /** Wraps the HTTP lease client (fault injection). */
  leaseClient?: (inner: RecordingLeaseClient) => LeaseClient;
  clock?: Clock;
  handOverOnStop?: boolean;
}

export interface ManagedOperator {
  controller: BerthLeaseController;
  managed: ManagedWorkloads;
  central: RecordingLeaseClient;
  registry: Registry;
  recorder: EventRecorder;
  /**
   * One reconcile of a lease, directly (no queue). A reconcile that fails on a write conflict (the target's
   * controller wrote its status between our read and our write, more often than the reconcile's own
   * retries cover on a loaded machine) is run again, at most five times, as the queue would requeue it.
   */
  reconcile(name: string, signal?: AbortSignal): ReturnType<BerthLeaseController['reconciler']['reconcile']>;
  metric(name: string, labels?: Record<string, string>): Promise<number | undefined>;
  /** A histogram's count and sum (seconds). */
  histogram(name: string): Promise<{ count: number; sum: number }>;
  /** Starts the BerthLease controller and the managed controllers (caches first). */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function createManagedOperator(cluster: ManagedCluster, o: ManagedOperatorOptions): ManagedOperator {
  const kc = cluster.operatorKubeConfig();
  const transport = new KubeTransport(kc);
  const registry = createRegistry({ defaultMetrics: false });
  const logger = silent();
  const recorder = new EventRecorder({
    sink: eventSinkFor(transport),
    reportingController: 'berth.skaphos.io/berth-operator',
    reportingInstance: `berth-operator-${o.clusterId}`,
    logger,
  });
  const central = new RecordingLeaseClient(new HttpLeaseClient({ baseUrl: o.centralUrl, logger }));
  const leaseClient = o.leaseClient ? o.leaseClient(central) : central;
  // The opt-in admission scope, as `run` wires it by default.
  const scope = new NamespaceScope({ transport, logger, registry });
  const managed = new ManagedWorkloads({
    transport,
    operatorNamespace: OPERATOR_NS,
    recorder,
    registry,
    logger,
    scope,
    ...(o.clock ? { clock: o.clock } : {}),
  });
  const controller = new BerthLeaseController({
    transport,
    leaseClient,
    clusterIdentity: o.clusterId,
    operatorNamespace: OPERATOR_NS,
    workloads: managed,
    recorder,
    registry,
    logger,
    scope,
    ...(o.clock ? { clock: o.clock } : {}),
    ...(o.handOverOnStop ? { handOverOnStop: true } : {}),
  });
  managed.attach(controller);
  // The leader's last step of a namespace's leaving the scope, as `run` wires it.
  const exit = new ScopeExit({
    namespaces: scope.informer,
    scope,
    io: () => kubeAdmissionIO(transport),
    transport,
    clock: realClock,
    recorder,
    logger,
    registry,
  });
  let started = false;
  let stopped: Promise<void> | undefined;
  return {
    controller,
    managed,
    central,
    registry,
    recorder,
    async reconcile(name, signal) {
      // Direct reconciles need the scope's cache, which start() would otherwise start.
      scope.informer.start();
      await scope.informer.waitForSync(signal);
      for (let attempt = 1; ; attempt++) {
        try {
          return await controller.reconciler.reconcile(
            `${NS}/${name}`,
            reconcileContext(NS, name, logger, signal),
          );
        } catch (err) {
          if (!isConflict(err) || attempt >= 5) throw err;
        }
      }
    },
    metric: (name, labels = {}) => sumMetric(registry, name, labels),
    async histogram(name) {
      const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
      const pick = (suffix: string): number =>
        values
          .filter((v) => (v as { metricName?: string }).metricName === `${name}${suffix}`)
          .reduce((sum, v) => sum + v.value, 0);
      return { count: pick('_count'), sum: pick('_sum') };
    },
    async start() {
      started = true;
      managed.startInformers();
      await managed.waitForCaches();
      await controller.start();
      await managed.startControllers();
      await exit.start();
    },
    stop() {
      stopped ??= (async () => {
        if (started) {
          await Promise.all([controller.stop(), managed.stopControllers(), exit.stop()]);
          await managed.stopCaches();
        }
        await scope.informer.stop();
        await recorder.flush();
        central.inner.close();
        await transport.close();
      })();
      return stopped;
    },
  };
}
