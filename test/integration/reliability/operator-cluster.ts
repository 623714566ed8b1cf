// A sandbox cluster prepared as the install prepares a real one, for operator child processes: the BerthLease
// CRD, the operator and lease namespaces, the webhook Service (routed by the sandbox to the replicas'
// admission servers, each only while its /readyz answers 200), and the fail-closed webhook configurations
// without a caBundle (the leader fills it in, selfsigned mode). Operators run as their service account.
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type V1Pod,
} from '@kubernetes/client-node';
import { type BerthLease, type BerthLeaseSpec, GROUP, PLURAL, VERSION } from '../../../src/berth/api.ts';
import { installBerthLeaseCrd } from '../../../src/berth/crd.ts';
import { parseBerthLease } from '../../../src/berth/leaseio.ts';
import type { SandboxOptions } from '../../../src/sandbox/index.ts';
import {
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
} from '../../../webhooks/configurations.ts';
import { eventually } from '../../helpers/eventually.ts';
import { type OperatorProcess, startOperatorProcess } from '../../helpers/operator-process.ts';
import { startTestSandbox, type TestSandbox, writeTempKubeconfig } from '../../helpers/sandbox.ts';

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
  /** The central lease API: runs the BerthLease controller as this cluster id. */
  central?: { url: string; clusterId: string };
  /** Extra environment of the process (e.g. HOME, TMPDIR, NODE_OPTIONS). */
  env?: Record<string, string>;
  /** Entry point other than `src/main.ts` (the built `main.js`). */
  main?: string;
}

export class OperatorCluster {
  readonly t: TestSandbox;
  readonly core: CoreV1Api;
  readonly apps: AppsV1Api;
  readonly custom: CustomObjectsApi;
  readonly coordination: CoordinationV1Api;
  readonly admission: AdmissionregistrationV1Api;
  readonly kubeconfig: string;

  private constructor(t: TestSandbox, kubeconfig: string) {
    this.t = t;
    this.kubeconfig = kubeconfig;
    this.core = t.kc.makeApiClient(CoreV1Api);
    this.apps = t.kc.makeApiClient(AppsV1Api);
    this.custom = t.kc.makeApiClient(CustomObjectsApi);
    this.coordination = t.kc.makeApiClient(CoordinationV1Api);
    this.admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
  }

  static async start(options: SandboxOptions = {}): Promise<OperatorCluster> {
    const t = await startTestSandbox(options);
    try {
      await installBerthLeaseCrd(t.kc);
      const core = t.kc.makeApiClient(CoreV1Api);
      for (const ns of [OPERATOR_NS, NS]) await core.createNamespace({ body: { metadata: { name: ns } } });
      await core.createNamespacedService({
        namespace: OPERATOR_NS,
        body: {
          metadata: { name: WEBHOOK_SERVICE },
          spec: { ports: [{ name: 'webhook', port: 443, targetPort: 9443 }] },
        },
      });
      const admission = t.kc.makeApiClient(AdmissionregistrationV1Api);
      const params = { namespace: OPERATOR_NS, serviceName: WEBHOOK_SERVICE, name: CONFIGURATION_NAME };
      await admission.createMutatingWebhookConfiguration({ body: mutatingWebhookConfiguration(params) });
      await admission.createValidatingWebhookConfiguration({ body: validatingWebhookConfiguration(params) });
      const kubeconfig = await writeTempKubeconfig(
        t.sandbox.users.serviceAccount(OPERATOR_NS, SERVICE_ACCOUNT).kubeconfig,
      );
      return new OperatorCluster(t, kubeconfig);
    } catch (err) {
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
      ...(o.central ? [`--berth-api-server=${o.central.url}`, `--cluster-id=${o.central.clusterId}`] : []),
      ...(o.args ?? []),
    ];
    return startOperatorProcess({
      kubeconfig: this.kubeconfig,
      namespace: OPERATOR_NS,
      args,
      name: o.name,
      ...(o.env ? { env: o.env } : {}),
      ...(o.main ? { main: o.main } : {}),
    });
  }

  /**
   * Routes the webhook Service to these replicas (replacing the previous endpoints), each used while its
   * /readyz answers 200, as the endpoints controller and kube-proxy would.
   */
  async route(replicas: readonly OperatorProcess[]): Promise<void> {
    const endpoints = await Promise.all(
      replicas.map(async (r) => ({
        host: '127.0.0.1',
        port: await r.webhookPort(),
        readinessUrl: `http://${await r.health()}/readyz`,
      })),
    );
    this.t.sandbox.services.map(OPERATOR_NS, WEBHOOK_SERVICE, endpoints);
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
    return parseBerthLease(await this.custom.createNamespacedCustomObject({ ...this.ref(), body }));
  }

  async lease(name: string): Promise<BerthLease | undefined> {
    try {
      return parseBerthLease(await this.custom.getNamespacedCustomObject({ ...this.ref(), name }));
    } catch (err) {
      if ((err as { code?: number }).code === 404) return undefined;
      throw err;
    }
  }

  stop(): Promise<void> {
    return this.t.stop();
  }
}
