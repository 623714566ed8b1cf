// Objects of the managed-workload unit tests: a managed BerthLease (Active by default), its Deployment,
// ReplicaSet and Pods, stamped as WorkloadAdmission stamps them. Built with test/builders, read as the
// managed path reads what the API server returns (parseKubeObject).
import {
  type BerthLease,
  MANAGED_LEASE,
  MANAGED_UID,
  SCHEDULING_GATE,
  type WorkloadStatus,
} from '../../../src/berth/api.ts';
import { formatTime } from '../../../src/berth/status.ts';
import { type KubeObj, parseKubeObject } from '../../../src/berth/workload-io.ts';
import type { JsonObject } from '../../../src/workloads/model.ts';
import { BerthLeaseBuilder } from '../../builders/berthlease.ts';
import { DeploymentBuilder } from '../../builders/deployment.ts';
import { PodBuilder } from '../../builders/pod.ts';
import { ReplicaSetBuilder } from '../../builders/replicaset.ts';
import { NS } from './fakes.ts';

export const T0 = Date.UTC(2026, 8, 7, 9, 0, 0);
export const LEASE_UID = 'lease-uid';
export const TARGET_UID = 'deploy-uid';
export const RS_UID = 'rs-uid';
const DELETED_AT = '2026-09-07T09:00:00Z';

export function managedLease(
  workload: Partial<WorkloadStatus> | undefined = {},
  o: { deleting?: boolean; name?: string } = {},
): BerthLease {
  const name = o.name ?? 'web';
  const lease = new BerthLeaseBuilder(name)
    .namespace(NS)
    .uid(LEASE_UID)
    .generation(1)
    .resourceVersion('10')
    .withFinalizer()
    .holderIdentity('h')
    .targets('Deployment', name)
    .scales(3)
    .status({});
  if (o.deleting) lease.deleting(DELETED_AT);
  if (workload !== undefined)
    lease.workload({
      targetUID: TARGET_UID,
      phase: 'Active',
      leaseName: name,
      holder: 'cluster-east',
      token: 7,
      deadline: formatTime(T0 + 30_000),
      ...workload,
    });
  return lease.obj();
}

const binding = (leaseName = 'web') => ({ [MANAGED_LEASE]: leaseName, [MANAGED_UID]: LEASE_UID });

/** A built object as the managed path reads it back; `over` replaces metadata fields. */
const stored = (object: JsonObject, over: Partial<KubeObj['metadata']> = {}): KubeObj => {
  const read = parseKubeObject(object, 'a fixture');
  return { ...read, metadata: { ...read.metadata, ...over } };
};

export const deployment = (replicas: number | undefined, over: Partial<KubeObj['metadata']> = {}): KubeObj =>
  stored(
    new DeploymentBuilder('web')
      .namespace(NS)
      .uid(TARGET_UID)
      .labels({ [MANAGED_UID]: LEASE_UID })
      .annotations(binding())
      .replicas(replicas)
      .json(),
    over,
  );

export const replicaSet = (over: Partial<KubeObj['metadata']> = {}): KubeObj =>
  stored(
    new ReplicaSetBuilder('web-abc')
      .namespace(NS)
      .uid(RS_UID)
      .annotations(binding())
      .ownedBy({ kind: 'Deployment', name: 'web', uid: TARGET_UID })
      .replicas(3)
      .json(),
    over,
  );

export function pod(
  name: string,
  o: {
    gated?: boolean;
    phase?: string;
    deleting?: boolean;
    annotations?: Record<string, string>;
    rs?: string;
  } = {},
): KubeObj {
  const p = new PodBuilder(name)
    .namespace(NS)
    .uid(`uid-${name}`)
    .labels({ [MANAGED_UID]: LEASE_UID })
    .annotations(o.annotations ?? binding())
    .ownedBy({ kind: 'ReplicaSet', name: 'web-abc', uid: o.rs ?? RS_UID })
    .phase(o.phase ?? 'Pending');
  if (o.gated !== false) p.gates(SCHEDULING_GATE);
  if (o.deleting) p.deleting(DELETED_AT);
  return stored(p.json());
}
