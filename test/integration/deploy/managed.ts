// The managed-workload scenario: the samples plus a StatefulSet and a ReplicaSet target are admitted, their
// leases held (embedded central server) and the targets activated; the ReplicaSet controller's Pod is
// registered and ungated, and runs; a managed Job runs; then the leases are deleted and the operator stops
// every target, suspends and deletes the Job, deletes the Pods and releases — all as the operator's
// service account.
import { AppsV1Api, BatchV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, LeaseState, PLURAL, SCHEDULING_GATE, VERSION } from '../../../src/berth/api.ts';
import { BerthLeaseBuilder } from '../../builders/berthlease.ts';
import { JobBuilder } from '../../builders/job.ts';
import { ReplicaSetBuilder } from '../../builders/replicaset.ts';
import { StatefulSetBuilder } from '../../builders/statefulset.ts';
import { apiOutcome } from '../../helpers/api.ts';
import { applySample } from './install.ts';
import {
  admission,
  admissionAnswers,
  admissionScope,
  berthLease,
  caBundles,
  caCertificate,
  caReplacement,
  createNamespace,
  leaderElection,
  MAIN_CONTAINER,
  nodeTaintGuard,
  type Scenario,
  type ScenarioContext,
  secureMetrics,
  trusting,
  waitFor,
  withCentral,
  withOperator,
} from './scenarios.ts';

const LEASES = ['web', 'nightly-report', 'db', 'rs'];

/** A BerthLease guarding an apps/v1 `kind/name` with scale 1 / scale 0. */
const scaledLease = (name: string, kind: 'StatefulSet' | 'ReplicaSet') =>
  new BerthLeaseBuilder(name).holderIdentity('cluster-a').targets(kind, name).scales(1).obj();

interface Targets {
  replicas: (number | undefined)[];
  suspend: boolean | undefined;
}

async function targets(ctx: ScenarioContext, namespace: string): Promise<Targets> {
  const apps = ctx.t.kc.makeApiClient(AppsV1Api);
  const batch = ctx.t.kc.makeApiClient(BatchV1Api);
  const [web, db, rs, cron] = await Promise.all([
    apps.readNamespacedDeployment({ name: 'web', namespace }),
    apps.readNamespacedStatefulSet({ name: 'db', namespace }),
    apps.readNamespacedReplicaSet({ name: 'rs', namespace }),
    batch.readNamespacedCronJob({ name: 'nightly-report', namespace }),
  ]);
  return { replicas: [web, db, rs].map((o) => o.spec?.replicas), suspend: cron.spec?.suspend };
}

export const managedWorkloads: Scenario = {
  name: 'managed-workloads',
  async run(ctx) {
    const apps = ctx.t.kc.makeApiClient(AppsV1Api);
    const batch = ctx.t.kc.makeApiClient(BatchV1Api);
    const core = ctx.t.kc.makeApiClient(CoreV1Api);
    const custom = ctx.t.kc.makeApiClient(CustomObjectsApi);
    const namespace = await createNamespace(ctx, 'managed');
    const ref = (name: string) => ({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name });
    const db = { 'app.kubernetes.io/name': 'db' };
    const rs = { 'app.kubernetes.io/name': 'rs' };
    await withOperator(ctx, withCentral(ctx), async (op) => {
      await waitFor(ctx, 'the replica ready', () => op.ready());
      const ca = await waitFor(ctx, 'the CA', () => caCertificate(ctx));
      await waitFor(ctx, 'the caBundles trust the CA', async () =>
        (await caBundles(ctx)).every(trusting(ca)),
      );
      await admissionAnswers(ctx);
      for (const sample of ['samples/deployment/', 'samples/cronjob/'])
        await applySample(ctx.t, namespace, sample);
      await custom.createNamespacedCustomObject({ ...ref('db'), body: scaledLease('db', 'StatefulSet') });
      await custom.createNamespacedCustomObject({ ...ref('rs'), body: scaledLease('rs', 'ReplicaSet') });
      await apps.createNamespacedStatefulSet({
        namespace,
        body: new StatefulSetBuilder('db')
          .replicas(0)
          .serviceName('db')
          .templateLabels(db)
          .containers(MAIN_CONTAINER)
          .restartPolicy('Always')
          .obj(),
      });
      await apps.createNamespacedReplicaSet({
        namespace,
        body: new ReplicaSetBuilder('rs')
          .replicas(0)
          .templateLabels(rs)
          .containers(MAIN_CONTAINER)
          .restartPolicy('Always')
          .obj(),
      });
      await waitFor(ctx, 'the leases held', async () => {
        const leases = await Promise.all(LEASES.map((n) => custom.getNamespacedCustomObject(ref(n))));
        return leases.every(
          (l) => (l as { status?: { leaseState?: string } }).status?.leaseState === LeaseState.Held,
        );
      });
      await waitFor(ctx, 'the targets activated', async () => {
        const now = await targets(ctx, namespace);
        return now.replicas.every((r) => r === 1) && now.suspend === false;
      });
      // The ReplicaSet controller's Pod, born gated: the operator registers and ungates it, and it runs.
      const pod = await waitFor(ctx, 'the managed Pod ungated and running', async () =>
        (await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/name=rs' })).items.find(
          (p) =>
            !(p.spec?.schedulingGates ?? []).some((g) => g.name === SCHEDULING_GATE) &&
            p.status?.phase === 'Running',
        ),
      );
      // What the CronJob controller would create at its schedule (02:00): a Job of the unsuspended CronJob.
      const cron = await batch.readNamespacedCronJob({ name: 'nightly-report', namespace });
      const report = { 'app.kubernetes.io/name': 'nightly-report' };
      await batch.createNamespacedJob({
        namespace,
        body: new JobBuilder('nightly-report-1')
          .ownedBy(cron)
          .templateLabels(report)
          .containers(MAIN_CONTAINER)
          .obj(),
      });
      for (const name of LEASES) await custom.deleteNamespacedCustomObject(ref(name));
      await waitFor(
        ctx,
        'the leases drained and released',
        async () =>
          (await Promise.all(LEASES.map((n) => apiOutcome(custom.getNamespacedCustomObject(ref(n)))))).every(
            (o) => o.code === 404,
          ),
        20_000,
      );
      const after = await targets(ctx, namespace);
      if (!after.replicas.every((r) => r === 0) || after.suspend !== true)
        throw new Error(`targets not stopped before the release: ${JSON.stringify(after)}`);
      if (
        (await apiOutcome(core.readNamespacedPod({ name: pod.metadata?.name ?? '', namespace }))).code !== 404
      )
        throw new Error('the managed Pod was not deleted');
      if ((await apiOutcome(batch.readNamespacedJob({ name: 'nightly-report-1', namespace }))).code !== 404)
        throw new Error('the managed Job was not deleted');
    });
  },
};

/** Every scenario, in the order the RBAC test runs them. */
export const SCENARIOS: readonly Scenario[] = [
  leaderElection,
  secureMetrics,
  berthLease,
  nodeTaintGuard,
  admission,
  admissionScope,
  caReplacement,
  managedWorkloads,
];
