// Objects of the managed-workload unit tests: a managed BerthLease (Active by default), its Deployment,
// ReplicaSet and Pods, stamped as WorkloadAdmission stamps them.
import {
  type BerthLease,
  MANAGED_LEASE,
  MANAGED_UID,
  SCHEDULING_GATE,
  type WorkloadStatus,
} from '../../../src/berth/api.ts';
import { formatTime } from '../../../src/berth/status.ts';
import type { KubeObj } from '../../../src/berth/workload-io.ts';
import { NS } from './fakes.ts';

export const T0 = Date.UTC(2026, 8, 7, 9, 0, 0);
export const LEASE_UID = 'lease-uid';
export const TARGET_UID = 'deploy-uid';
export const RS_UID = 'rs-uid';

export function managedLease(
  workload: Partial<WorkloadStatus> | undefined = {},
  o: { deleting?: boolean; name?: string } = {},
): BerthLease {
  const name = o.name ?? 'web';
  return {
    apiVersion: 'berth.skaphos.io/v1alpha1',
    kind: 'BerthLease',
    metadata: {
      name,
      namespace: NS,
      uid: LEASE_UID,
      generation: 1,
      resourceVersion: '10',
      finalizers: ['berth.skaphos.io/lease-release'],
      ...(o.deleting ? { deletionTimestamp: '2026-09-07T09:00:00Z' } : {}),
    },
    spec: {
      leaseName: name,
      holderIdentity: 'h',
      ttlSeconds: 30,
      heartbeatIntervalSeconds: 10,
      semantics: 'at-most-once',
      target: { apiVersion: 'apps/v1', kind: 'Deployment', name },
      acquireAction: { scale: { replicas: 3 } },
      releaseAction: { scale: { replicas: 0 } },
    },
    status:
      workload === undefined
        ? {}
        : {
            workload: {
              targetUID: TARGET_UID,
              phase: 'Active',
              leaseName: name,
              holder: 'cluster-east',
              token: 7,
              deadline: formatTime(T0 + 30_000),
              ...workload,
            },
          },
  };
}

const binding = (leaseName = 'web') => ({ [MANAGED_LEASE]: leaseName, [MANAGED_UID]: LEASE_UID });

export const deployment = (
  replicas: number | undefined,
  over: Partial<KubeObj['metadata']> = {},
): KubeObj => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: {
    name: 'web',
    namespace: NS,
    uid: TARGET_UID,
    annotations: binding(),
    labels: { [MANAGED_UID]: LEASE_UID },
    ...over,
  },
  spec: replicas === undefined ? {} : { replicas },
});

export const replicaSet = (over: Partial<KubeObj['metadata']> = {}): KubeObj => ({
  apiVersion: 'apps/v1',
  kind: 'ReplicaSet',
  metadata: {
    name: 'web-abc',
    namespace: NS,
    uid: RS_UID,
    annotations: binding(),
    ownerReferences: [
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: TARGET_UID, controller: true },
    ],
    ...over,
  },
  spec: { replicas: 3 },
});

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
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: NS,
      uid: `uid-${name}`,
      labels: { [MANAGED_UID]: LEASE_UID },
      annotations: o.annotations ?? binding(),
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-abc', uid: o.rs ?? RS_UID, controller: true },
      ],
      ...(o.deleting ? { deletionTimestamp: '2026-09-07T09:00:00Z' } : {}),
    },
    spec: o.gated === false ? {} : { schedulingGates: [{ name: SCHEDULING_GATE }] },
    status: { phase: o.phase ?? 'Pending' },
  };
}
