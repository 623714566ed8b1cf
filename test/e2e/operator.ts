// The operator as the end-to-end suite runs it: `berth-operator run` in this process, out of cluster, with
// what a real install gives it, but under this run's own names so that several runs or an installed
// operator do not collide:
// - its namespace, a ServiceAccount and least-privilege RBAC (the rule data of src/berth/rbac.ts and
//   scripts/deploy-rbac.ts), and a token for that account from the TokenRequest API: the operator talks to
//   the API server as `system:serviceaccount:<ns>:<sa>`, the only user its webhooks let ungate Pods;
// - WorkloadAdmission served on this machine (--cert-mode files, a throwaway CA with the address in the
//   certificate) and Mutating/Validating configurations built by webhooks/configurations.ts with two
//   changes: `clientConfig.url` to the webhook host (E2E_WEBHOOK_HOST, or this machine's address for
//   control planes of the file's own) instead of the in-cluster Service, and a namespaceSelector narrowed
//   to the test namespaces, so that the fail-closed webhooks never stand in the way of the rest of the
//   cluster (nor lock it if the run is killed before its cleanup).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, type V1LabelSelector } from '@kubernetes/client-node';
import { admissionReadRules, LEADER_ELECTION_ID, metricsAuthRbac } from '../../scripts/deploy-rbac.ts';
import { berthLeaseRbacObjects } from '../../src/berth/rbac.ts';
import { parseFlags } from '../../src/cli.ts';
import { parseRunConfig } from '../../src/config.ts';
import { parseFeatureConfigs } from '../../src/features.ts';
import type { Manager } from '../../src/kube/manager.ts';
import { nodeTaintRbacObjects } from '../../src/nodetaint/rbac.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { buildOperator, runCommand } from '../../src/run.ts';
import {
  mutatingWebhookConfiguration,
  NAMESPACE_NAME_LABEL,
  validatingWebhookConfiguration,
} from '../../webhooks/configurations.ts';
import { testPki } from '../fixtures/webhooks/certs.ts';
import { eventually } from '../helpers/eventually.ts';
import { type E2eCluster, RUN_ID, RUN_LABEL } from './cluster.ts';

const SERVICE_ACCOUNT = 'berth-operator';

/** A free TCP port on this machine (the webhook port must be known before the configurations exist). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** On everything cluster-scoped the suite creates: `kubectl delete ... -l berth-e2e/run` after a killed run. */
const runLabels = { [RUN_LABEL]: RUN_ID };

const urlHost = (host: string): string => (host.includes(':') ? `[${host}]` : host);

export interface OperatorInstallOptions {
  /** Unique per run and cluster: the operator namespace and the names of its cluster-scoped objects. */
  prefix: string;
  /** The only namespaces the webhooks admit (where the scenarios create their workloads). */
  appNamespaces: string[];
  webhookHost: string;
  /**
   * Also the install's `berth-operator-metrics-auth` rules (TokenReview and SubjectAccessReview), under
   * this run's name, for an operator started with `--metrics-secure`.
   */
  secureMetrics?: boolean;
  /** Also the install's leader-election Role (the default Lease name), for `--leader-elect`. */
  leaderElection?: boolean;
  /**
   * Also the node taint guard's RBAC (src/nodetaint/rbac.ts, agents in the operator namespace), for
   * `--node-taint-guard=true`. With no agent Pods there it watches Nodes and never taints one.
   */
  nodeTaintGuard?: boolean;
}

export class E2eOperator {
  readonly cluster: E2eCluster;
  readonly namespace: string;
  readonly user: string;
  readonly configurationName: string;
  readonly #kc: KubeConfig;
  readonly #certDir: string;
  readonly #port: number;
  #running: { manager: Manager; done: Promise<{ exitCode: number }> } | undefined;

  private constructor(cluster: E2eCluster, prefix: string, kc: KubeConfig, certDir: string, port: number) {
    this.cluster = cluster;
    this.namespace = prefix;
    this.user = `system:serviceaccount:${prefix}:${SERVICE_ACCOUNT}`;
    this.configurationName = prefix;
    this.#kc = kc;
    this.#certDir = certDir;
    this.#port = port;
  }

  /** Everything the operator needs in `cluster`; each piece is registered for the cluster's cleanup. */
  static async install(cluster: E2eCluster, o: OperatorInstallOptions): Promise<E2eOperator> {
    const namespace = o.prefix;
    await cluster.createNamespace(namespace);
    await cluster.core.createNamespacedServiceAccount({
      namespace,
      body: { metadata: { name: SERVICE_ACCOUNT } },
    });
    const subject = { namespace, name: SERVICE_ACCOUNT };
    const [role, binding] = berthLeaseRbacObjects({
      name: o.prefix,
      serviceAccount: subject,
      managedWorkloads: true,
      admissionScope: true,
    });
    const admissionName = `${o.prefix}-admission`;
    const admissionRules = [
      ...admissionReadRules(),
      // The start-up check of the live webhook configurations (readiness).
      {
        apiGroups: ['admissionregistration.k8s.io'],
        resources: ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'],
        resourceNames: [o.prefix],
        verbs: ['get'],
      },
    ];
    const metricsAuthRules = metricsAuthRbac().flatMap((obj) =>
      obj.kind === 'ClusterRole' && 'rules' in obj ? (obj.rules ?? []) : [],
    );
    for (const [name, rules] of [
      [o.prefix, role.rules ?? []],
      [admissionName, admissionRules],
      ...(o.secureMetrics ? ([[`${o.prefix}-metrics-auth`, metricsAuthRules]] as const) : []),
    ] as const) {
      await cluster.rbac.createClusterRole({
        body: { metadata: { name, labels: runLabels }, rules: [...rules] },
      });
      cluster.onCleanup(`clusterrole ${name}`, () => cluster.rbac.deleteClusterRole({ name }));
      await cluster.rbac.createClusterRoleBinding({
        body: {
          metadata: { name, labels: runLabels },
          roleRef: { ...binding.roleRef, name },
          subjects: [{ kind: 'ServiceAccount', ...subject }],
        },
      });
      cluster.onCleanup(`clusterrolebinding ${name}`, () => cluster.rbac.deleteClusterRoleBinding({ name }));
    }

    if (o.leaderElection) {
      const name = `${o.prefix}-leader-election`;
      await cluster.rbac.createNamespacedRole({
        namespace,
        body: {
          metadata: { name, labels: runLabels },
          rules: [
            { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
            {
              apiGroups: ['coordination.k8s.io'],
              resources: ['leases'],
              resourceNames: [LEADER_ELECTION_ID],
              verbs: ['get', 'list', 'update', 'watch'],
            },
          ],
        },
      });
      await cluster.rbac.createNamespacedRoleBinding({
        namespace,
        body: {
          metadata: { name, labels: runLabels },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
          subjects: [{ kind: 'ServiceAccount', ...subject }],
        },
      });
      // Namespaced: they go with the namespace.
    }
    if (o.nodeTaintGuard) {
      const objects = nodeTaintRbacObjects({
        name: `${o.prefix}-node-taint-guard`,
        agentNamespace: namespace,
        subject: { kind: 'ServiceAccount', ...subject },
        labels: runLabels,
      });
      for (const obj of objects) {
        const name = obj.metadata?.name ?? '';
        const ns = obj.metadata?.namespace;
        if (obj.kind === 'ClusterRole' && 'rules' in obj) {
          await cluster.rbac.createClusterRole({ body: obj });
          cluster.onCleanup(`clusterrole ${name}`, () => cluster.rbac.deleteClusterRole({ name }));
        } else if (obj.kind === 'ClusterRoleBinding' && 'roleRef' in obj) {
          await cluster.rbac.createClusterRoleBinding({ body: obj });
          cluster.onCleanup(`clusterrolebinding ${name}`, () =>
            cluster.rbac.deleteClusterRoleBinding({ name }),
          );
        } else if (obj.kind === 'Role' && 'rules' in obj && ns !== undefined) {
          await cluster.rbac.createNamespacedRole({ namespace: ns, body: obj });
        } else if (obj.kind === 'RoleBinding' && 'roleRef' in obj && ns !== undefined) {
          await cluster.rbac.createNamespacedRoleBinding({ namespace: ns, body: obj });
        }
      }
    }

    // kubectl create token: an audience-bound, expiring token (one hour outlasts the suite).
    const issued = await cluster.core.createNamespacedServiceAccountToken({
      namespace,
      name: SERVICE_ACCOUNT,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    const server = cluster.kc.getCurrentCluster();
    if (server === null) throw new Error(`${cluster.kubeconfigPath}: no current cluster`);
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [server],
      users: [{ name: SERVICE_ACCOUNT, token: issued.status?.token ?? '' }],
      contexts: [{ name: SERVICE_ACCOUNT, cluster: server.name, user: SERVICE_ACCOUNT }],
      currentContext: SERVICE_ACCOUNT,
    });

    const pki = await testPki([o.webhookHost], `${o.prefix}-webhook-ca`);
    const certDir = await mkdtemp(join(tmpdir(), 'berth-e2e-certs-'));
    await writeFile(join(certDir, 'tls.crt'), pki.pair.cert);
    await writeFile(join(certDir, 'tls.key'), pki.pair.key, { mode: 0o600 });
    await writeFile(join(certDir, 'ca.crt'), pki.caCert);
    cluster.onCleanup('webhook certificates', () => rm(certDir, { recursive: true, force: true }));

    const port = await freePort();
    const base = `https://${urlHost(o.webhookHost)}:${port}`;
    const scoped = (selector: V1LabelSelector | undefined): V1LabelSelector => ({
      matchExpressions: [
        ...(selector?.matchExpressions ?? []),
        { key: NAMESPACE_NAME_LABEL, operator: 'In', values: o.appNamespaces },
      ],
    });
    const params = {
      namespace,
      name: o.prefix,
      caBundle: pki.caBundle,
      labels: runLabels,
      scope: 'opt-in',
    } as const;
    const mutating = mutatingWebhookConfiguration(params);
    const validating = validatingWebhookConfiguration(params);
    for (const hook of [...(mutating.webhooks ?? []), ...(validating.webhooks ?? [])]) {
      hook.clientConfig = { url: `${base}${hook.clientConfig.service?.path ?? ''}`, caBundle: pki.caBundle };
      hook.namespaceSelector = scoped(hook.namespaceSelector);
    }
    await cluster.admission.createMutatingWebhookConfiguration({ body: mutating });
    cluster.onCleanup(`mutatingwebhookconfiguration ${o.prefix}`, () =>
      cluster.admission.deleteMutatingWebhookConfiguration({ name: o.prefix }),
    );
    await cluster.admission.createValidatingWebhookConfiguration({ body: validating });
    cluster.onCleanup(`validatingwebhookconfiguration ${o.prefix}`, () =>
      cluster.admission.deleteValidatingWebhookConfiguration({ name: o.prefix }),
    );
    return new E2eOperator(cluster, o.prefix, kc, certDir, port);
  }

  get running(): boolean {
    return this.#running !== undefined;
  }

  /** `host:port` of /metrics while it runs with a metrics address (`args`), else undefined. */
  get metricsAddress(): string | undefined {
    return this.#running?.manager.addresses?.metrics;
  }

  /**
   * Starts `berth-operator run` with the flags an install passes (then `args`, which override them), and
   * waits until /readyz answers 200.
   */
  async start(clusterId: string, centralUrl: string, args: string[] = []): Promise<void> {
    if (this.#running) throw new Error(`the operator in ${this.cluster.name} already runs`);
    const flags = parseFlags(runCommand, [
      `--namespace=${this.namespace}`,
      `--berth-api-server=${centralUrl}`,
      `--cluster-id=${clusterId}`,
      '--enable-workload-admission',
      `--workload-operator-user=${this.user}`,
      `--workload-operator-namespace=${this.namespace}`,
      `--webhook-configuration-name=${this.configurationName}`,
      // The configurations call this machine by URL, so the suite writes them itself.
      '--webhook-registration=false',
      `--webhook-port=${this.#port}`,
      '--cert-mode=files',
      `--cert-dir=${this.#certDir}`,
      '--health-probe-bind-address=127.0.0.1:0',
      '--metrics-bind-address=0',
      '--drain-window=0s',
      '--graceful-shutdown-timeout=60s',
      '--node-taint-guard=false',
      ...args,
    ]);
    const logger = createLogger({
      level: process.env.BERTH_TEST_LOGS ? 'debug' : 'warn',
      name: `berth-operator-e2e-${this.cluster.name}`,
    });
    const { manager } = buildOperator(parseRunConfig(flags), {
      kubeConfig: this.#kc,
      namespace: this.namespace,
      logger,
      features: parseFeatureConfigs(flags, this.namespace),
    });
    this.#running = { manager, done: manager.run() };
    await eventually(
      async () => {
        const health = manager.addresses?.health;
        if (health === undefined) return false;
        const res = await fetch(`http://${health}/readyz?verbose`);
        if (res.status !== 200) throw new Error(`/readyz ${res.status}: ${await res.text()}`);
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  }

  /** A graceful stop (SIGTERM): the leader hands its managed workloads over first. Returns the exit code. */
  async stop(): Promise<number> {
    const running = this.#running;
    if (running === undefined) return 0;
    this.#running = undefined;
    running.manager.stop('e2e');
    return (await running.done).exitCode;
  }
}
