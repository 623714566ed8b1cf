// The objects the scenarios create: BerthLeases guarding a Deployment or a CronJob, the workloads
// themselves (Pods of E2E_IMAGE that start without a pull and stop at once on SIGTERM), and reads of them.
import type { V1CronJob, V1Deployment, V1Pod } from '@kubernetes/client-node';
import { API_VERSION, type BerthLease, type BerthLeaseSpec, KIND } from '../../src/berth/api.ts';
import { parseBerthLease } from '../../src/berth/leaseio.ts';
import { isNotFound } from '../../src/kube/client.ts';
import { BerthLeaseBuilder } from '../builders/berthlease.ts';
import { CronJobBuilder } from '../builders/cronjob.ts';
import { DeploymentBuilder } from '../builders/deployment.ts';
import type { Owner } from '../builders/object.ts';
import { PodBuilder } from '../builders/pod.ts';
import { type EventuallyOptions, eventually } from '../helpers/eventually.ts';
import { whenSettled } from '../helpers/rejection.ts';
import { berthLeaseRef, type E2eCluster } from './cluster.ts';
import { e2eEnv } from './env.ts';

/** Short enough for a takeover after expiry within the test timeout, long enough for a busy kind node. */
export const TTL_S = 10;
export const HEARTBEAT_S = 2;

/** A BerthLease guarding Deployment `name`: scale to `replicas` while held, to 0 when released. */
export const deploymentLease = (name: string, replicas: number): BerthLeaseSpec =>
  leaseOf(name).targets('Deployment', name).scales(replicas).spec();

/** A BerthLease guarding CronJob `name`: resumed while held, suspended when released. */
export const cronJobLease = (name: string): BerthLeaseSpec =>
  leaseOf(name).targets('CronJob', name).suspends().spec();

/** The holder identity is unused: the operator holds as its --cluster-id. */
const leaseOf = (name: string): BerthLeaseBuilder =>
  new BerthLeaseBuilder(name)
    .holderIdentity('unused-with-cluster-id')
    .ttlSeconds(TTL_S)
    .heartbeatIntervalSeconds(HEARTBEAT_S);

/** The container of every Pod the scenarios create. */
const app = { name: 'app', image: e2eEnv.image, imagePullPolicy: 'IfNotPresent' };

/** Created at 0 replicas: the lease's acquireAction scales it up where the lease is held. */
export const deployment = (name: string): V1Deployment =>
  new DeploymentBuilder(name).replicas(0).containers(app).terminationGracePeriodSeconds(1).obj();

/** Every minute, one Job at a time; created suspended, the lease's acquireAction resumes it. */
export const cronJob = (name: string): V1CronJob =>
  new CronJobBuilder(name)
    .schedule('* * * * *')
    .suspend(true)
    .concurrencyPolicy('Forbid')
    .backoffLimit(0)
    .containers(app)
    .terminationGracePeriodSeconds(1)
    .obj();

/** A bare Pod controlled by `owner` (as its controller would create it), for late and forged creates. */
export const ownedPod = (name: string, owner: Owner, o: { nodeName?: string } = {}): V1Pod => {
  const pod = new PodBuilder(name).ownedBy(owner).containers(app).terminationGracePeriodSeconds(1);
  return (o.nodeName === undefined ? pod : pod.nodeName(o.nodeName)).obj();
};

export async function createLease(
  c: E2eCluster,
  namespace: string,
  name: string,
  spec: BerthLeaseSpec,
): Promise<BerthLease> {
  // A replica that just started, or a namespace just labelled, asks to retry a targeted lease until settled.
  return parseBerthLease(
    await whenSettled(() =>
      c.custom.createNamespacedCustomObject({
        ...berthLeaseRef(namespace),
        body: { apiVersion: API_VERSION, kind: KIND, metadata: { name }, spec },
      }),
    ),
  );
}

export async function readLease(
  c: E2eCluster,
  namespace: string,
  name: string,
): Promise<BerthLease | undefined> {
  try {
    return parseBerthLease(await c.custom.getNamespacedCustomObject({ ...berthLeaseRef(namespace), name }));
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** Polls the BerthLease until `ready` holds for it; returns it. */
export async function leaseWhen(
  c: E2eCluster,
  namespace: string,
  name: string,
  ready: (lease: BerthLease) => boolean,
  opts: EventuallyOptions = { timeoutMs: 60_000, intervalMs: 250 },
): Promise<BerthLease> {
  return eventually(async () => {
    const lease = await readLease(c, namespace, name);
    if (lease === undefined) throw new Error(`BerthLease ${namespace}/${name} not found in ${c.name}`);
    if (!ready(lease))
      throw new Error(`BerthLease ${namespace}/${name} in ${c.name}: status ${JSON.stringify(lease.status)}`);
    return lease;
  }, opts);
}

/** `eventually` for a probe that yields a value once ready (undefined or false until then). */
export async function until<T>(
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  opts: EventuallyOptions,
): Promise<T> {
  const value = await eventually(probe, opts);
  if (value === undefined || value === false) throw new Error('until: no value');
  return value;
}

export async function pods(c: E2eCluster, namespace: string, labelSelector: string): Promise<V1Pod[]> {
  return (await c.core.listNamespacedPod({ namespace, labelSelector })).items;
}

export { rejection } from '../helpers/rejection.ts';
