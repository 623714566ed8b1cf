// The upgrade from the cluster-wide registration (`--workload-admission-scope=all`, the Go operator's and
// earlier installs' behaviour) to the opt-in scope, as a rolling update does it: a replica of the new mode
// joins, the old one stops, the new leader labels the namespace that holds the managed workload into the
// scope, registers the scope's guards with the selectors still cluster-wide, waits for kube-apiserver's
// caches and only then narrows the webhooks' selectors. Meanwhile Pods of
// the managed chain are created the whole time, as its ReplicaSet controller would: every one that is
// admitted is born gated (docs/admission.md, "Upgrading to the opt-in scope"). The managed workload keeps
// running through it, and afterwards a namespace outside the scope is no longer reviewed.
//
// The operators are `berth-operator run` processes registering their own webhook configurations through
// the webhook Service, which only a local control plane routes to this machine: skipped on external
// clusters (E2E_KUBECONFIG).
import { AdmissionregistrationV1Api, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  GROUP,
  inAdmissionScope,
  PLURAL,
  SCHEDULING_GATE,
  SCOPE_LABEL,
  VERSION,
} from '../../src/berth/api.ts';
import { namespaceWritesPolicy } from '../../src/berth/rbac.ts';
import { eventually } from '../helpers/eventually.ts';
import type { OperatorProcess } from '../helpers/operator-process.ts';
import { appDeployment, deploymentLease } from '../integration/managed/harness.ts';
import {
  CONFIGURATION_NAME,
  OPERATOR_USER,
  OperatorCluster,
} from '../integration/reliability/operator-cluster.ts';
import { external } from './env.ts';

const LEGACY = 'legacy-apps';
const PLAIN = 'plain-apps';

let cluster: OperatorCluster;
const replicas: OperatorProcess[] = [];

beforeAll(async () => {
  if (external) return;
  cluster = await OperatorCluster.start();
  // The installs' policy on the operator's namespace writes, as kubectl apply -f deploy/install.yaml has it.
  const admission = cluster.t.kc.makeApiClient(AdmissionregistrationV1Api);
  const [policy, binding] = namespaceWritesPolicy(OPERATOR_USER);
  await admission.createValidatingAdmissionPolicy({ body: policy });
  await admission.createValidatingAdmissionPolicyBinding({ body: binding });
}, 120_000);

afterAll(async () => {
  for (const r of replicas) if (!r.hasExited()) r.kill('SIGKILL');
  await Promise.all(replicas.map((r) => r.exited));
  await cluster?.stop();
});

const selectors = async (): Promise<number[]> => {
  const m = await cluster.admission.readMutatingWebhookConfiguration({ name: CONFIGURATION_NAME });
  return (m.webhooks ?? []).map((w) => w.namespaceSelector?.matchExpressions?.length ?? 0);
};

it.skipIf(external)(
  'labels the namespaces that use Berth before the selectors narrow; Pods created meanwhile are born gated',
  async () => {
    // Before: the cluster-wide mode, with a managed Deployment running in a namespace never labelled.
    const old = cluster.startOperator({ name: 'v1', args: ['--workload-admission-scope=all'] });
    replicas.push(old);
    await old.ready(60_000);
    await cluster.route([old]);
    await eventually(async () => (await selectors()).join() === '1', { timeoutMs: 60_000 });
    await cluster.t.createNamespace(LEGACY);
    await cluster.t.createNamespace(PLAIN);
    const ref = { group: GROUP, version: VERSION, plural: PLURAL, namespace: LEGACY };
    await cluster.custom.createNamespacedCustomObject({
      ...ref,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'BerthLease',
        metadata: { name: 'web' },
        spec: deploymentLease('web', 1),
      },
    });
    await eventually(
      async () =>
        (
          (await cluster.custom.getNamespacedCustomObject({ ...ref, name: 'web' })) as {
            metadata?: { finalizers?: string[] };
          }
        ).metadata?.finalizers?.length === 1,
    );
    await cluster.apps.createNamespacedDeployment({ namespace: LEGACY, body: appDeployment('web', 0) });
    const running = async (): Promise<V1Pod[]> =>
      (await cluster.core.listNamespacedPod({ namespace: LEGACY, labelSelector: 'app=web' })).items.filter(
        (p) => !(p.spec?.schedulingGates ?? []).some((g) => g.name === SCHEDULING_GATE) && p.spec?.nodeName,
      );
    await eventually(async () => (await running()).length === 1, { timeoutMs: 60_000 });
    const workload = async () =>
      (
        (await cluster.custom.getNamespacedCustomObject({ ...ref, name: 'web' })) as {
          status?: { workload?: { phase?: string; token?: number } };
        }
      ).status?.workload;
    const before = (await workload())!;
    expect(before.phase).toBe('Active');
    const rs = (await cluster.apps.listNamespacedReplicaSet({ namespace: LEGACY, labelSelector: 'app=web' }))
      .items[0]!;

    // Pods of the managed chain, created the whole time the switch runs.
    const born = { gated: 0, ungated: [] as string[], denied: 0 };
    let creating = true;
    let n = 0;
    const creator = (async () => {
      while (creating) {
        try {
          const pod = await cluster.core.createNamespacedPod({
            namespace: LEGACY,
            body: {
              metadata: {
                name: `during-${n++}`,
                labels: { app: 'web' },
                ownerReferences: [
                  {
                    apiVersion: 'apps/v1',
                    kind: 'ReplicaSet',
                    name: rs.metadata!.name!,
                    uid: rs.metadata!.uid!,
                    controller: true,
                  },
                ],
              },
              spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
            },
          });
          if ((pod.spec?.schedulingGates ?? []).some((g) => g.name === SCHEDULING_GATE)) born.gated++;
          else born.ungated.push(pod.metadata?.name ?? '');
        } catch {
          born.denied++;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    // The rolling update: a replica of the new mode joins, then the old one stops (its Lease released).
    const next = cluster.startOperator({ name: 'v2' });
    replicas.push(next);
    await next.ready(60_000);
    await cluster.route([old, next]);
    old.kill('SIGTERM');
    await old.exited;
    await cluster.route([next]);
    await eventually(
      async () => inAdmissionScope((await cluster.core.readNamespace({ name: LEGACY })).metadata?.labels),
      { timeoutMs: 60_000 },
    );
    const labelledAt = Date.now();
    await eventually(async () => (await selectors()).join() === '2', { timeoutMs: 60_000 });
    const narrowedAfterMs = Date.now() - labelledAt;
    creating = false;
    await creator;

    expect(born.ungated).toEqual([]);
    expect(born.gated).toBeGreaterThan(10);
    // The selectors narrowed only once the labels were seen settled (at least 5 s after the labelling).
    expect(narrowedAfterMs).toBeGreaterThanOrEqual(4_000);
    // The managed workload ran through the upgrade, and still does: the same activation, never stopped
    // (the new leader resumed it from status; the Pods made meanwhile were permitted by it, and the
    // ReplicaSet controller removes the surplus).
    expect(await workload()).toMatchObject({ phase: 'Active', token: before.token });
    expect((await running()).length).toBeGreaterThanOrEqual(1);
    // The namespace stays in scope: it leaves only in two steps, and only once nothing managed is left.
    const leaving = await cluster.t.kubectl(['label', 'namespace', LEGACY, `${SCOPE_LABEL}-`]);
    expect(leaving.stderr).toContain('leaves the workload admission scope in two steps');
    // Outside the scope, a Pod whose owner is gone is not reviewed (in scope it would be denied).
    await cluster.core.createNamespacedPod({
      namespace: PLAIN,
      body: {
        metadata: {
          name: 'orphan',
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'ReplicaSet',
              name: 'gone',
              uid: '00000000-0000-0000-0000-000000000001',
              controller: true,
            },
          ],
        },
        spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] },
      },
    });
  },
  240_000,
);
