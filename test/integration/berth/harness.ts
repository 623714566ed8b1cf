// The lease-only BerthLease controller against a real control plane, of its own when it runs the
// controller (which reconciles BerthLeases in every namespace), else the run's shared one with namespaces
// of its own: the CRD, the lease and operator namespaces, the least-privilege RBAC bound to the operator's
// service account, whose requests go through an ApiProxy (faults, counting), and the embedded central
// lease server over HTTP.
import {
  CustomObjectsApi,
  EventsV1Api,
  type EventsV1Event,
  type KubeConfig,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { type BerthLease, type BerthLeaseSpec, GROUP, PLURAL, VERSION } from '../../../src/berth/api.ts';
import { BerthLeaseController } from '../../../src/berth/controller.ts';
import {
  type AcquireResult,
  HttpLeaseClient,
  type LeaseCallOptions,
  type LeaseClient,
} from '../../../src/berth/leaseclient.ts';
import { parseBerthLease } from '../../../src/berth/leaseio.ts';
import { berthLeaseRbacObjects } from '../../../src/berth/rbac.ts';
import { isNotFound } from '../../../src/kube/client.ts';
import type { Clock } from '../../../src/kube/clock.ts';
import type { ReconcileContext } from '../../../src/kube/controller.ts';
import { EventRecorder, eventSinkFor } from '../../../src/kube/events.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { createLogger, type Logger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { type ServiceAccountUser, TestCluster, uniqueName } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';

/** The lease and operator namespaces on a cluster of its own (Cluster.start). */
export const LEASE_NS = 'team-a';
export const OPERATOR_NS = 'berth-system';
export const SERVICE_ACCOUNT = 'berth-operator';
export const OPERATOR_USER = `system:serviceaccount:${OPERATOR_NS}:${SERVICE_ACCOUNT}`;

export const spec = (over: Partial<BerthLeaseSpec> = {}): BerthLeaseSpec => ({
  leaseName: 'shared',
  holderIdentity: 'worker-east-1',
  ttlSeconds: 30,
  heartbeatIntervalSeconds: 10,
  semantics: 'at-most-once',
  ...over,
});

const silent = (): Logger => createLogger({ level: process.env.BERTH_TEST_LOGS ? 'debug' : 'silent' });

export class Cluster {
  readonly t: TestCluster;
  /** In front of the API server for the operator's clients only (operatorKubeConfig). */
  readonly proxy: ApiProxy;
  /** The operator's service account (a TokenRequest token). */
  readonly operator: ServiceAccountUser;
  readonly custom: CustomObjectsApi;
  readonly events: EventsV1Api;
  readonly name: string;
  /** Where the BerthLeases live. */
  readonly leaseNs: string;
  /** The operator's namespace (its service account's). */
  readonly operatorNs: string;
  readonly operatorUser: string;

  private constructor(
    t: TestCluster,
    proxy: ApiProxy,
    operator: ServiceAccountUser,
    name: string,
    namespaces: { lease: string; operator: string },
  ) {
    this.t = t;
    this.proxy = proxy;
    this.operator = operator;
    this.name = name;
    this.leaseNs = namespaces.lease;
    this.operatorNs = namespaces.operator;
    this.operatorUser = operator.username;
    this.custom = t.kc.makeApiClient(CustomObjectsApi);
    this.events = t.kc.makeApiClient(EventsV1Api);
  }

  /**
   * A control plane of its own (no KWOK Nodes: lease-only leases run no Pods), for suites that run the
   * controller: namespaces LEASE_NS and OPERATOR_NS.
   */
  static async start(name = 'cluster'): Promise<Cluster> {
    const t = await TestCluster.own({ nodes: 0 });
    try {
      for (const ns of [LEASE_NS, OPERATOR_NS]) await t.createNamespace(ns);
      return await Cluster.#setUp(
        t,
        name,
        { lease: LEASE_NS, operator: OPERATOR_NS },
        'berth-operator-berthlease',
      );
    } catch (err) {
      await t.stop();
      throw err;
    }
  }

  /**
   * The run's shared control plane, for suites that call the reconciler directly (no controller runs):
   * namespaces and RBAC objects of their own, removed at stop().
   */
  static async shared(name = 'cluster'): Promise<Cluster> {
    const t = await TestCluster.shared();
    try {
      const namespaces = { lease: await t.namespace('team-a'), operator: await t.namespace('berth-system') };
      return await Cluster.#setUp(t, name, namespaces, uniqueName('berth-operator-berthlease'));
    } catch (err) {
      await t.stop();
      throw err;
    }
  }

  /** The CRD, the operator's RBAC (in effect once this resolves), its service account and the proxy. */
  static async #setUp(
    t: TestCluster,
    name: string,
    namespaces: { lease: string; operator: string },
    rbacName: string,
  ): Promise<Cluster> {
    await t.installBerthLeaseCrd();
    const rbac = t.kc.makeApiClient(RbacAuthorizationV1Api);
    const [role, binding] = berthLeaseRbacObjects({
      name: rbacName,
      serviceAccount: { namespace: namespaces.operator, name: SERVICE_ACCOUNT },
    });
    const gone = (err: unknown): void => {
      if (!isNotFound(err)) throw err;
    };
    await rbac.createClusterRole({ body: role });
    t.onCleanup(`ClusterRole ${rbacName}`, () => rbac.deleteClusterRole({ name: rbacName }).catch(gone));
    await rbac.createClusterRoleBinding({ body: binding });
    t.onCleanup(`ClusterRoleBinding ${rbacName}`, () =>
      rbac.deleteClusterRoleBinding({ name: rbacName }).catch(gone),
    );
    const operator = await t.serviceAccount(namespaces.operator, SERVICE_ACCOUNT);
    const proxy = await ApiProxy.start(t);
    const cluster = new Cluster(t, proxy, operator, name, namespaces);
    try {
      // The RBAC authorizer sees the new binding through its informer, a moment after the write.
      const asOperator = operator.kc.makeApiClient(CustomObjectsApi);
      await eventually(() => asOperator.listNamespacedCustomObject({ ...cluster.ref() }));
      return cluster;
    } catch (err) {
      await proxy.stop();
      throw err;
    }
  }

  ref(): { group: string; version: string; plural: string; namespace: string } {
    return { group: GROUP, version: VERSION, plural: PLURAL, namespace: this.leaseNs };
  }

  /** The operator's service account, through the proxy (so that tests see and fault its requests). */
  operatorKubeConfig(): KubeConfig {
    return this.t.kubeConfigFor(this.proxy.kubeconfigFor(this.operator.kubeconfig));
  }

  /** `finalizers`: created with them, as if a reconcile had already added the operator's. */
  async createLease(name: string, leaseSpec: BerthLeaseSpec, finalizers: string[] = []): Promise<BerthLease> {
    const body = {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'BerthLease',
      metadata: { name, ...(finalizers.length > 0 ? { finalizers } : {}) },
      spec: leaseSpec,
    };
    return parseBerthLease(await this.custom.createNamespacedCustomObject({ ...this.ref(), body }));
  }

  async lease(name: string): Promise<BerthLease | undefined> {
    try {
      return parseBerthLease(await this.custom.getNamespacedCustomObject({ ...this.ref(), name }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async mustLease(name: string): Promise<BerthLease> {
    const lease = await this.lease(name);
    if (lease === undefined) throw new Error(`BerthLease ${name} not found in ${this.name}`);
    return lease;
  }

  async deleteLease(name: string): Promise<void> {
    await this.custom.deleteNamespacedCustomObject({ ...this.ref(), name });
  }

  /** Events about a BerthLease, oldest first. */
  async leaseEvents(name: string): Promise<EventsV1Event[]> {
    const list = await this.events.listNamespacedEvent({ namespace: this.leaseNs });
    return list.items
      .filter((e) => e.regarding?.kind === 'BerthLease' && e.regarding.name === name)
      .sort((a, b) => String(a.eventTime).localeCompare(String(b.eventTime)));
  }

  async stop(): Promise<void> {
    await this.proxy.stop();
    await this.t.stop();
  }
}

// The central server is shared with the end-to-end suites; the integration suites import it from here.
export { type Central, OutageStore, startCentral } from '../../helpers/central.ts';

export interface CentralCall {
  op: 'acquire' | 'release';
  name: string;
  holder: string;
  fencingToken?: number;
  timeoutMs: number | undefined;
  /** When the call started (performance.now()). */
  at: number;
  result?: AcquireResult;
  error?: string;
}

/** The HTTP lease client, recording every call and its outcome. */
export class RecordingLeaseClient implements LeaseClient {
  readonly inner: HttpLeaseClient;
  readonly calls: CentralCall[] = [];

  constructor(inner: HttpLeaseClient) {
    this.inner = inner;
  }

  async acquire(
    namespace: string,
    name: string,
    holder: string,
    ttlSeconds: number,
    options?: LeaseCallOptions,
  ): Promise<AcquireResult> {
    const call: CentralCall = {
      op: 'acquire',
      name,
      holder,
      timeoutMs: options?.timeoutMs,
      at: performance.now(),
    };
    this.calls.push(call);
    try {
      call.result = await this.inner.acquire(namespace, name, holder, ttlSeconds, options);
      return call.result;
    } catch (err) {
      call.error = (err as Error).message;
      throw err;
    }
  }

  renew(): Promise<AcquireResult> {
    throw new Error('the reconciler never calls Renew');
  }

  async release(
    namespace: string,
    name: string,
    holder: string,
    fencingToken: number,
    options?: LeaseCallOptions,
  ): Promise<void> {
    const call: CentralCall = {
      op: 'release',
      name,
      holder,
      fencingToken,
      timeoutMs: options?.timeoutMs,
      at: performance.now(),
    };
    this.calls.push(call);
    try {
      await this.inner.release(namespace, name, holder, fencingToken, options);
    } catch (err) {
      call.error = (err as Error).message;
      throw err;
    }
  }

  of(op: CentralCall['op']): CentralCall[] {
    return this.calls.filter((c) => c.op === op);
  }
}

export interface OperatorOptions {
  clusterId: string;
  centralUrl: string;
  /** Reconciler clock (deadlines, requeues); default the real clock. */
  clock?: Clock;
  operatorNamespace?: string;
}

export interface Operator {
  controller: BerthLeaseController;
  central: RecordingLeaseClient;
  registry: Registry;
  recorder: EventRecorder;
  /** Runs one reconcile of a lease directly (no queue), as the Go unit tests call Reconcile. */
  reconcile(name: string, signal?: AbortSignal): ReturnType<BerthLeaseController['reconciler']['reconcile']>;
  metric(name: string, labels?: Record<string, string>): Promise<number | undefined>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function createOperator(cluster: Cluster, o: OperatorOptions): Operator {
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
  const controller = new BerthLeaseController({
    transport,
    leaseClient: central,
    clusterIdentity: o.clusterId,
    operatorNamespace: o.operatorNamespace ?? cluster.operatorNs,
    recorder,
    registry,
    logger,
    ...(o.clock === undefined ? {} : { clock: o.clock }),
  });
  let started = false;
  let stopped: Promise<void> | undefined;
  return {
    controller,
    central,
    registry,
    recorder,
    reconcile: (name, signal) =>
      controller.reconciler.reconcile(
        `${cluster.leaseNs}/${name}`,
        reconcileContext(cluster.leaseNs, name, logger, signal),
      ),
    metric: (name, labels = {}) => sumMetric(registry, name, labels),
    async start() {
      started = true;
      await controller.start();
    },
    stop() {
      stopped ??= (async () => {
        if (started) await controller.stop();
        await recorder.flush();
        central.inner.close();
        await transport.close();
      })();
      return stopped;
    },
  };
}

/** The sum of a metric's samples matching the labels, or undefined when none match. */
export async function sumMetric(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  const match = values.filter((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want));
  return match.length === 0 ? undefined : match.reduce((sum, v) => sum + v.value, 0);
}

/** What the Controller hands a reconcile, for calling a reconciler directly in a test. */
export function reconcileContext(
  namespace: string,
  name: string,
  log: Logger,
  signal?: AbortSignal,
): ReconcileContext {
  return { signal: signal ?? new AbortController().signal, log, reconcileID: 'test', namespace, name };
}
