// A ReplicaSet stamped for a BerthLease that is gone must not take in new Pods, even once its namespace
// holds no BerthLease at all: its Pods could later run ungated under another lease's target (a Deployment
// of a new lease adopting the ReplicaSet). Admission walks every owner chain, as the Go operator does,
// and refuses them (docs/admission.md "Owner chains"). Against the real kube-apiserver, with the operator
// running in-process.
import type { V1Pod, V1ReplicaSet } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AdmissionMessage } from '../../../src/berth/api.ts';
import { KubeTransport } from '../../../src/kube/transport.ts';
import { decideWorkloadAdmission } from '../../../webhooks/decide-workload.ts';
import { kubeAdmissionIO } from '../../../webhooks/kube-io.ts';
import { IN_SCOPE } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { rejection } from '../../helpers/rejection.ts';
import { type Central, startCentral } from '../berth/harness.ts';
import {
  createManagedOperator,
  deploymentLease,
  ManagedCluster,
  type ManagedOperator,
  until,
} from './harness.ts';

let cluster: ManagedCluster;
let central: Central;
let op: ManagedOperator;

beforeAll(async () => {
  cluster = await ManagedCluster.start('east');
  central = await startCentral();
  op = createManagedOperator(cluster, { clusterId: 'cluster-east', centralUrl: central.url });
  await op.start();
}, 60_000);
afterAll(async () => {
  await op?.stop();
  await central?.stop();
  await cluster?.stop();
});

it('refuses Pods joining a ReplicaSet stamped for a deleted lease, though no lease is left', async () => {
  const ns = await cluster.t.namespace('stale-stamp', IN_SCOPE);
  const lease = (name: string) => cluster.lease(name, ns);
  await cluster.createLease('old', deploymentLease('old', 1), ns);
  await eventually(async () => (await lease('old'))?.metadata.finalizers?.length === 1);
  await cluster.createDeployment('old', 0, ns);
  await eventually(async () => (await lease('old'))?.status?.workload?.phase === 'Active', {
    timeoutMs: 15_000,
  });
  const stamped: V1ReplicaSet = await until(async () => {
    const list = await cluster.apps.listNamespacedReplicaSet({ namespace: ns, labelSelector: 'app=old' });
    return list.items[0];
  });
  // The Deployment goes with orphan propagation (its ReplicaSet stays, stamped), then the lease.
  await cluster.apps.deleteNamespacedDeployment({ namespace: ns, name: 'old', propagationPolicy: 'Orphan' });
  await cluster.deleteLease('old', ns);
  await eventually(async () => (await lease('old')) === undefined, { timeoutMs: 15_000 });
  expect((await cluster.t.kubectl(['get', 'berthleases', '-n', ns, '-o', 'name'])).stdout.trim()).toBe('');

  // A user's Pod naming the stamped ReplicaSet as its controller, through the real API server.
  const owner = {
    apiVersion: 'apps/v1',
    kind: 'ReplicaSet',
    name: stamped.metadata!.name!,
    uid: stamped.metadata!.uid!,
    controller: true,
  };
  const body: V1Pod = {
    metadata: { name: 'stray', ownerReferences: [owner] },
    spec: { containers: [{ name: 'c', image: 'registry.example.com/app:1' }] },
  };
  expect(await rejection(cluster.core.createNamespacedPod({ namespace: ns, body }))).toContain(
    AdmissionMessage.noLiveLease,
  );

  // The ReplicaSet controller adopting a plain Pod with its labels: the same walk refuses the UPDATE.
  const plain = await cluster.core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name: 'plain', labels: { ...(stamped.spec?.selector.matchLabels ?? {}) } },
      spec: { containers: [{ name: 'c', image: 'registry.example.com/app:1' }] },
    },
  });
  const transport = new KubeTransport(cluster.t.kc);
  try {
    const adoption = {
      uid: 'adopt',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      name: 'plain',
      namespace: ns,
      operation: 'UPDATE' as const,
      userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller' },
      object: { ...plain, metadata: { ...plain.metadata, ownerReferences: [owner] } } as Record<
        string,
        unknown
      >,
      oldObject: plain as Record<string, unknown>,
    };
    const decision = await decideWorkloadAdmission(adoption, 'validate', {
      io: kubeAdmissionIO(transport),
      now: () => Date.now(),
      operatorUser: 'system:serviceaccount:berth-system:berth-operator',
    });
    expect(decision).toMatchObject({ allowed: false, code: 403, message: AdmissionMessage.noLiveLease });
  } finally {
    await transport.close();
  }
  // And the live Pod was never adopted.
  const live = await cluster.core.readNamespacedPod({ namespace: ns, name: 'plain' });
  expect(live.metadata?.ownerReferences ?? []).toEqual([]);
}, 90_000);
