// WorkloadAdmission's view of workload objects: the kind of a review (one of the workload kinds, or
// `Other`), and what the handler rules read of an object parsed by the shared model
// (src/workloads/model.ts): its Pod template, the managed-lease stamp, its activity fields. Pure.
import { MANAGED_LEASE, MANAGED_UID, SCHEDULING_GATE } from '../src/berth/api.ts';
import {
  kindInGroup,
  type Metadata,
  type PodTemplate,
  type Workload,
  type WorkloadKind,
} from '../src/workloads/model.ts';

/** The kind of a review; everything that is not a workload kind is `Other` (never managed, never stamped). */
export type ReviewKind = WorkloadKind | 'Other';

/** By API group and kind: matchPolicy Equivalent may send another version of the same resource. */
export const reviewKind = (group: string, kind: string): ReviewKind => kindInGroup(group, kind) ?? 'Other';

/** Kinds a BerthLease can target, where resolution looks for a lease (docs/behaviour.md §4.3 step 3). */
export const isRootKind = (kind: ReviewKind): boolean =>
  kind === 'Deployment' || kind === 'StatefulSet' || kind === 'ReplicaSet' || kind === 'CronJob';

// ---- accessors ----

export const annotationsOf = (m: Metadata | null | undefined): Record<string, string> => m?.annotations ?? {};
export const labelsOf = (m: Metadata | null | undefined): Record<string, string> => m?.labels ?? {};

export const hasManagedUIDAnnotation = (o: Workload | null | undefined): boolean =>
  annotationsOf(o?.metadata)[MANAGED_UID] !== undefined;

/** The annotations resolution treats as a claim to be managed (§4.3 step 4). */
export const hasManagedAnnotations = (o: Workload | null | undefined): boolean => {
  const a = annotationsOf(o?.metadata);
  return a[MANAGED_UID] !== undefined || a[MANAGED_LEASE] !== undefined;
};

/** Any managed-lease metadata on the object itself: either annotation or the label. */
export const hasManagedMetadata = (o: Workload | null | undefined): boolean =>
  hasManagedAnnotations(o) || labelsOf(o?.metadata)[MANAGED_UID] !== undefined;

/** JSON path of the Pod template of each kind; [] is the object itself (a Pod). */
export function templatePath(kind: ReviewKind): string[] | undefined {
  switch (kind) {
    case 'Pod':
      return [];
    case 'Deployment':
    case 'StatefulSet':
    case 'ReplicaSet':
    case 'Job':
      return ['spec', 'template'];
    case 'CronJob':
      return ['spec', 'jobTemplate', 'spec', 'template'];
    case 'Other':
      return undefined;
  }
}

/** The Pod template (the Pod itself for a Pod), or undefined when the kind has none or it is missing. */
export function templateOf(o: Workload, kind: ReviewKind): PodTemplate | undefined {
  switch (kind) {
    case 'Pod':
      return { metadata: o.metadata ?? null, spec: o.spec ?? null };
    case 'Deployment':
    case 'StatefulSet':
    case 'ReplicaSet':
    case 'Job':
      return o.spec?.template ?? undefined;
    case 'CronJob':
      return o.spec?.jobTemplate?.spec?.template ?? undefined;
    case 'Other':
      return undefined;
  }
}

export const gatesOf = (t: PodTemplate | undefined): string[] =>
  (t?.spec?.schedulingGates ?? []).map((g) => g.name);

export const hasGate = (t: PodTemplate | undefined): boolean => gatesOf(t).includes(SCHEDULING_GATE);

export const nodeNameOf = (t: PodTemplate | undefined): string => t?.spec?.nodeName ?? '';

/**
 * Whether the workload is stopped: CronJob and Job with suspend: true, the others with replicas 0.
 * A Deployment, StatefulSet or ReplicaSet without replicas runs one (the API default).
 */
export function isInactive(o: Workload, kind: ReviewKind): boolean {
  if (kind === 'CronJob' || kind === 'Job') return o.spec?.suspend === true;
  return replicasOf(o) === 0;
}

export const replicasOf = (o: Workload): number => o.spec?.replicas ?? 1;

/** §4.4 step 7d: suspend true -> false (CronJob, Job) or more replicas (the others). */
export function increasesActivity(o: Workload, old: Workload, kind: ReviewKind): boolean {
  if (kind === 'CronJob' || kind === 'Job') return old.spec?.suspend === true && o.spec?.suspend !== true;
  if (kind === 'Pod' || kind === 'Other') return false;
  return replicasOf(o) > replicasOf(old);
}
