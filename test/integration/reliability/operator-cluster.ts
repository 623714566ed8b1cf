// A control plane of its own prepared as the install prepares a real one, for operator child processes: the
// BerthLease CRD, the operator and lease namespaces, the operator's RBAC (the install's base and selfsigned
// layers), the webhook Service (routed to the replicas' admission servers, each endpoint Ready only while
// its /readyz answers 200), and the fail-closed webhook configurations without a caBundle (the leader fills
// it in, selfsigned mode). Operators run as their service account, through a fault proxy (`proxy`) that
// only their requests pass.
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  BatchV1Api,
  CoordinationV1Api,
  type CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  type V1Pod,
} from '@kubernetes/client-node';
import type { ControlPlaneOptions } from '../../../hack/controlplane/controlplane.ts';
import { baseRbac, selfSignedRbac } from '../../../scripts/deploy-rbac.ts';
import { type BerthLease, type BerthLeaseSpec, GROUP, PLURAL, VERSION } from '../../../src/berth/api.ts';
import { parseBerthLease } from '../../../src/berth/leaseio.ts';
import {
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
} from '../../../webhooks/configurations.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { IN_SCOPE, type ServiceRoute, TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { type OperatorProcess, startOperatorProcess } from '../../helpers/operator-process.ts';
import { whenSettled } from '../../helpers/rejection.ts';
import { type Central, startCentral } from '../berth/harness.ts';
import { appDeployment } from '../managed/harness.ts';

export const OPERATOR_NS = 'berth-system';
export const NS = 'team-a';
export const SERVICE_ACCOUNT = 'berth-operator';
export const OPERATOR_USER = `system:serviceaccount:${OPERATOR_NS}:${SERVICE_ACCOUNT}`;
export const WEBHOOK_SERVICE = 'berth-operator-webhook';
export const CONFIGURATION_NAME = 'berth-operator-injection-workloads';
export const LEADER_LEASE = 'berth-operator-leader';
export const CA_SECRET = 'berth-operator-webhook-ca';

/** Short leader election: a SIGKILLed leader's Lease expires after 2 s. */
export const LEADER_FLAGS = [
  '--leader-elect',
  '--leader-election-lease-duration=2s',
  '--leader-election-renew-deadline=1s',
  '--leader-election-retry-period=250ms',
];

export interface StartOptions {
  name: string;
  /** Flags after the cluster's defaults (they win). */
  args?: string[];
  /** The central lease API and this cluster's id; default the cluster's own quiet central server. */
  central?: { url: string; clusterId: string };
  /** Extra environment of the process (e.g. HOME, TMPDIR, NODE_OPTIONS). */
  env?: Record<string, string>;
  /** Entry point other than `src/main.ts` (the built `main.js`). */
  main?: string;
  /** OperatorProcessOptions.logLimit (long runs). */
  logLimit?: number;
}

/** Creates each object as the admin (apply order: as given). */
export async function createObjects(kc: KubeConfig, objects: readonly KubernetesObject[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const object of objects) await api.create(object);
}

export class OperatorCluster {
  readonly t: TestCluster;
  /** In front of the API server for the operators (and only them): faults and records of their requests. */
  readonly proxy: ApiProxy;
  readonly core: CoreV1Api;
  readonly apps: AppsV1Api;
  readonly batch: BatchV1Api;
  readonly custom: CustomObjectsApi;
  readonly coordination: CoordinationV1Api;
  readonly admission: AdmissionregistrationV1Api;
  /** Path of the operators' kubeconfig: their service account's token, through `proxy`. */
  readonly kubeconfig: string;
  /**
   * A central lease API for operators started without one: workload admission needs the BerthLease
   * controller (`run` refuses it alone), even where a test looks at the webhooks only.
   */
  readonly central: Central;
  #route: ServiceRoute | undefined;

  private constructor(t: TestCluster, proxy: ApiProxy, kubeconfig: string, central: Central) {
    this.t = t;
    this.proxy = proxy;
    this.kubeconfig = kubeconfig;
    this.central = central;
    this.core = t.core;
    this.apps = t.kc.makeApiClient(AppsV1Api);
    this.batch = t.kc.makeApiClient(BatchV1Api);
    this.custom = t.kc.makeApiClient(CustomObjectsApi);
    this.coordination = t.kc.makeApiClient(CoordinationV1Api);
    this.admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  }

  /** A control plane of the caller's own (the operator's controllers and webhooks are cluster-wide). */
  static async start(options: ControlPlaneOptions = {}): Promise<OperatorCluster> {
    const t = await TestCluster.own(options);
    let proxy: ApiProxy | undefined;
    try {
      await t.installBerthLeaseCrd();
      await t.createNamespace(OPERATOR_NS);
      await t.createNamespace(NS, IN_SCOPE);
      await createObjects(t.kc, [...baseRbac(), ...selfSignedRbac()]);
      await t.core.createNamespacedService({
        namespace: OPERATOR_NS,
        body: {
          metadata: { name: WEBHOOK_SERVICE },
          spec: { ports: [{ name: 'webhook', port: 443, targetPort: 9443 }] },
        },
      });
      const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
      const params = {
        namespace: OPERATOR_NS,
        serviceName: WEBHOOK_SERVICE,
        name: CONFIGURATION_NAME,
        scope: 'opt-in',
      } as const;
      await admission.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(params) });
      await admission.createValidatingWebhookConfiguration({ body: validatingWebhookConfiguration(params) });
      proxy = await ApiProxy.start(t);
      const sa = await t.serviceAccount(OPERATOR_NS, SERVICE_ACCOUNT);
      // The RBAC authorizer sees the new bindings through its informer, a moment after the writes.
      const asOperator = sa.kc.makeApiClient(CustomObjectsApi);
      await eventually(() =>
        asOperator.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL }),
      );
      const kubeconfig = await t.writeKubeconfig(proxy.kubeconfigFor(sa.kubeconfig));
      const central = await startCentral();
      return new OperatorCluster(t, proxy, kubeconfig, central);
    } catch (err) {
      await proxy?.stop();
      await t.stop();
      throw err;
    }
  }

  /** An operator replica with workload admission (selfsigned certificates) and short leader election. */
  startOperator(o: StartOptions): OperatorProcess {
    const args = [
      ...LEADER_FLAGS,
      '--enable-workload-admission',
      `--workload-operator-user=${OPERATOR_USER}`,
      `--workload-operator-namespace=${OPERATOR_NS}`,
      `--webhook-service-name=${WEBHOOK_SERVICE}`,
      `--webhook-configuration-name=${CONFIGURATION_NAME}`,
      '--node-taint-guard=false',
      '--drain-window=0s',
      `--berth-api-server=${(o.central ?? this.central).url}`,
      // Every central server and fault front of this process has a certificate of one CA (central-tls.ts).
      `--berth-ca-bundle-file=${this.central.caFile}`,
      `--cluster-id=${o.central?.clusterId ?? 'test-cluster'}`,
      ...(o.args ?? []),
    ];
    return startOperatorProcess({
      kubeconfig: this.kubeconfig,
      namespace: OPERATOR_NS,
      args,
      name: o.name,
      ...(o.env ? { env: o.env } : {}),
      ...(o.main ? { main: o.main } : {}),
      ...(o.logLimit === undefined ? {} : { logLimit: o.logLimit }),
    });
  }

  /**
   * Routes the webhook Service to these replicas (replacing the previous endpoints), each Ready while its
   * /readyz answers 200, as the EndpointSlice controller would make a Pod's endpoint.
   */
  async route(replicas: readonly OperatorProcess[]): Promise<void> {
    const endpoints = await Promise.all(
      replicas.map(async (r) => ({
        port: await r.webhookPort(),
        readinessUrl: `http://${await r.health()}/readyz`,
      })),
    );
    if (this.#route === undefined)
      this.#route = await this.t.routeService(OPERATOR_NS, WEBHOOK_SERVICE, endpoints);
    else await this.#route.update(endpoints);
  }

  /** The caBundle of both configurations ('' when unset). */
  async caBundles(): Promise<{ mutating: string; validating: string }> {
    const [m, v] = await Promise.all([
      this.admission.readMutatingWebhookConfiguration({ name: CONFIGURATION_NAME }),
      this.admission.readValidatingWebhookConfiguration({ name: CONFIGURATION_NAME }),
    ]);
    return {
      mutating: m.webhooks?.[0]?.clientConfig.caBundle ?? '',
      validating: v.webhooks?.[0]?.clientConfig.caBundle ?? '',
    };
  }

  /** Sets the caBundle of both configurations, as an earlier operator would have left it. */
  async setCaBundle(caBundle: string): Promise<void> {
    const body = [{ op: 'add', path: '/webhooks/0/clientConfig/caBundle', value: caBundle }];
    await this.admission.patchMutatingWebhookConfiguration({ name: CONFIGURATION_NAME, body });
    await this.admission.patchValidatingWebhookConfiguration({ name: CONFIGURATION_NAME, body });
  }

  /** A plain Pod in the admitted namespace: goes through both webhooks (fail-closed). */
  createPod(name: string): Promise<V1Pod> {
    return this.core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { name, labels: { app: 'traffic' } },
        spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
      },
    });
  }

  /** Waits until admission answers: a throwaway Pod is admitted (and removed). */
  async admissionWorks(timeoutMs = 30_000): Promise<void> {
    let n = 0;
    await eventually(
      async () => {
        const name = `probe-${Date.now()}-${n++}`;
        await this.createPod(name);
        await this.core.deleteNamespacedPod({ namespace: NS, name, gracePeriodSeconds: 0 });
        return true;
      },
      { timeoutMs, intervalMs: 100 },
    );
  }

  async leaderHolder(): Promise<string> {
    try {
      const lease = await this.coordination.readNamespacedLease({
        namespace: OPERATOR_NS,
        name: LEADER_LEASE,
      });
      return lease.spec?.holderIdentity ?? '';
    } catch {
      return '';
    }
  }

  ref(): { group: string; version: string; plural: string; namespace: string } {
    return { group: GROUP, version: VERSION, plural: PLURAL, namespace: NS };
  }

  async createLease(name: string, spec: BerthLeaseSpec): Promise<BerthLease> {
    const body = { apiVersion: `${GROUP}/${VERSION}`, kind: 'BerthLease', metadata: { name }, spec };
    return parseBerthLease(
      await whenSettled(() => this.custom.createNamespacedCustomObject({ ...this.ref(), body })),
    );
  }

  async lease(name: string): Promise<BerthLease | undefined> {
    try {
      return parseBerthLease(await this.custom.getNamespacedCustomObject({ ...this.ref(), name }));
    } catch (err) {
      if ((err as { code?: number }).code === 404) return undefined;
      throw err;
    }
  }

  async deleteLease(name: string): Promise<void> {
    await this.custom.deleteNamespacedCustomObject({ ...this.ref(), name });
  }

  /** A Deployment (replicas as given) whose Pods carry `app=<name>`. */
  async createDeployment(name: string, replicas: number): Promise<void> {
    await this.apps.createNamespacedDeployment({ namespace: NS, body: appDeployment(name, replicas) });
  }

  async pods(labelSelector: string): Promise<V1Pod[]> {
    return (await this.core.listNamespacedPod({ namespace: NS, labelSelector })).items;
  }

  async stop(): Promise<void> {
    await this.central.stop();
    await this.proxy.stop();
    await this.t.stop();
  }
}
