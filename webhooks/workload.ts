// The parts of a workload object that WorkloadAdmission reads, parsed leniently from the raw JSON of a
// review or a GET: metadata (labels, annotations, owners, uid), the Pod template of each kind, and the
// activity fields (replicas, suspend). Pure.
import { z } from 'zod';
import { MANAGED_LEASE, MANAGED_UID, SCHEDULING_GATE } from '../src/berth/api.ts';

export type JsonObject = Record<string, unknown>;

/** The kinds WorkloadAdmission handles; everything else is `Other` (never managed, never stamped). */
export type WorkloadKind = 'Pod' | 'Deployment' | 'StatefulSet' | 'ReplicaSet' | 'Job' | 'CronJob' | 'Other';

const KINDS: Record<string, WorkloadKind> = {
  '/Pod': 'Pod',
  'apps/Deployment': 'Deployment',
  'apps/StatefulSet': 'StatefulSet',
  'apps/ReplicaSet': 'ReplicaSet',
  'batch/Job': 'Job',
  'batch/CronJob': 'CronJob',
};

/** By API group and kind: matchPolicy Equivalent may send another version of the same resource. */
export function workloadKind(group: string, kind: string): WorkloadKind {
  return KINDS[`${group}/${kind}`] ?? 'Other';
}

export const groupOf = (apiVersion: string): string => {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
};

/** Where each owner kind is read from (always the v1 of its group). */
export const OWNER_RESOURCES: Partial<
  Record<WorkloadKind, { apiVersion: string; group: string; plural: string }>
> = {
  Deployment: { apiVersion: 'apps/v1', group: 'apps', plural: 'deployments' },
  StatefulSet: { apiVersion: 'apps/v1', group: 'apps', plural: 'statefulsets' },
  ReplicaSet: { apiVersion: 'apps/v1', group: 'apps', plural: 'replicasets' },
  Job: { apiVersion: 'batch/v1', group: 'batch', plural: 'jobs' },
  CronJob: { apiVersion: 'batch/v1', group: 'batch', plural: 'cronjobs' },
};

/** Kinds whose controller owner is followed (docs/behaviour.md §4.3 step 2). */
export const isOwnerKind = (kind: WorkloadKind): boolean => OWNER_RESOURCES[kind] !== undefined;

/** Kinds a BerthLease can target, where resolution looks for a lease (§4.3 step 3). */
export const isRootKind = (kind: WorkloadKind): boolean =>
  kind === 'Deployment' || kind === 'StatefulSet' || kind === 'ReplicaSet' || kind === 'CronJob';

// ---- lenient schemas: the shapes kube sends, with null accepted wherever Go may write it ----

const stringMap = z.record(z.string(), z.string());

const ownerReferenceSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: z.boolean().nullish(),
});
export type OwnerReference = z.infer<typeof ownerReferenceSchema>;

const metadataSchema = z.looseObject({
  name: z.string().nullish(),
  generateName: z.string().nullish(),
  namespace: z.string().nullish(),
  uid: z.string().nullish(),
  resourceVersion: z.string().nullish(),
  deletionTimestamp: z.string().nullish(),
  labels: stringMap.nullish(),
  annotations: stringMap.nullish(),
  ownerReferences: z.array(ownerReferenceSchema).nullish(),
});
export type Metadata = z.infer<typeof metadataSchema>;

const podSpecSchema = z.looseObject({
  nodeName: z.string().nullish(),
  schedulingGates: z.array(z.looseObject({ name: z.string() })).nullish(),
});

const templateSchema = z.looseObject({
  metadata: metadataSchema.nullish(),
  spec: podSpecSchema.nullish(),
});
export type PodTemplate = z.infer<typeof templateSchema>;

/** A union of the fields of every handled kind; each kind only uses its own. */
export const workloadSchema = z.looseObject({
  apiVersion: z.string().nullish(),
  kind: z.string().nullish(),
  metadata: metadataSchema.nullish(),
  spec: z
    .looseObject({
      // Pod
      nodeName: z.string().nullish(),
      schedulingGates: z.array(z.looseObject({ name: z.string() })).nullish(),
      // Deployment, StatefulSet, ReplicaSet, Job
      replicas: z.number().nullish(),
      template: templateSchema.nullish(),
      // Job, CronJob
      suspend: z.boolean().nullish(),
      jobTemplate: z
        .looseObject({
          metadata: metadataSchema.nullish(),
          spec: z.looseObject({ template: templateSchema.nullish() }).nullish(),
        })
        .nullish(),
    })
    .nullish(),
});
export type Workload = z.infer<typeof workloadSchema>;

export type ParseResult = { ok: true; value: Workload } | { ok: false; error: string };

// ---- the same checks as workloadSchema, hand-written for the hot path ----

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
/** JSON.parse makes `__proto__` an own key; zod's copy drops it, so such objects are left to zod. */
const isPlain = (v: unknown): v is JsonObject => isObject(v) && !Object.hasOwn(v, '__proto__');
const nullishOr = (v: unknown, check: (v: JsonObject) => boolean): boolean =>
  v === undefined || v === null || (isPlain(v) && check(v));
const nullishString = (v: unknown): boolean => v === undefined || v === null || typeof v === 'string';

function isStringMap(v: JsonObject): boolean {
  for (const key in v) if (typeof v[key] !== 'string') return false;
  return true;
}

const isOwnerReference = (r: unknown): boolean =>
  isPlain(r) &&
  typeof r.apiVersion === 'string' &&
  typeof r.kind === 'string' &&
  typeof r.name === 'string' &&
  typeof r.uid === 'string' &&
  (r.controller === undefined || r.controller === null || typeof r.controller === 'boolean');

const isGates = (v: unknown): boolean =>
  v === undefined ||
  v === null ||
  (Array.isArray(v) && v.every((g) => isPlain(g) && typeof g.name === 'string'));

const isMetadata = (m: JsonObject): boolean =>
  nullishString(m.name) &&
  nullishString(m.generateName) &&
  nullishString(m.namespace) &&
  nullishString(m.uid) &&
  nullishString(m.resourceVersion) &&
  nullishString(m.deletionTimestamp) &&
  nullishOr(m.labels, isStringMap) &&
  nullishOr(m.annotations, isStringMap) &&
  (m.ownerReferences === undefined ||
    m.ownerReferences === null ||
    (Array.isArray(m.ownerReferences) && m.ownerReferences.every(isOwnerReference)));

const isTemplate = (t: JsonObject): boolean =>
  nullishOr(t.metadata, isMetadata) &&
  nullishOr(t.spec, (s) => nullishString(s.nodeName) && isGates(s.schedulingGates));

const isSpec = (s: JsonObject): boolean =>
  nullishString(s.nodeName) &&
  isGates(s.schedulingGates) &&
  (s.replicas === undefined || s.replicas === null || Number.isFinite(s.replicas)) &&
  nullishOr(s.template, isTemplate) &&
  (s.suspend === undefined || s.suspend === null || typeof s.suspend === 'boolean') &&
  nullishOr(
    s.jobTemplate,
    (j) => nullishOr(j.metadata, isMetadata) && nullishOr(j.spec, (js) => nullishOr(js.template, isTemplate)),
  );

/**
 * Whether workloadSchema accepts `raw` and its output equals `raw` (as isAdmissionReview does for the
 * review; workload-fast-path.test.ts checks both on generated workloads). parseWorkload then hands on
 * `raw` itself instead of zod's copy of every object it checks (~5 % of a no-read review's instructions),
 * so a parsed workload must never be mutated: nothing does (stamp.ts patches a structuredClone).
 */
export const isWorkload = (raw: unknown): raw is Workload =>
  isPlain(raw) &&
  nullishString(raw.apiVersion) &&
  nullishString(raw.kind) &&
  nullishOr(raw.metadata, isMetadata) &&
  nullishOr(raw.spec, isSpec);

export function parseWorkload(raw: unknown): ParseResult {
  if (isWorkload(raw)) return { ok: true, value: raw };
  const parsed = workloadSchema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, error: `${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}` };
}

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

/** The first ownerReference with controller: true (as metav1.GetControllerOf). */
export function controllerRef(o: Workload): OwnerReference | undefined {
  return (o.metadata?.ownerReferences ?? []).find((r) => r.controller === true);
}

export const ownerReferencesOf = (o: Workload | null | undefined): OwnerReference[] =>
  o?.metadata?.ownerReferences ?? [];

/** JSON path of the Pod template of each kind; [] is the object itself (a Pod). */
export function templatePath(kind: WorkloadKind): string[] | undefined {
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
export function templateOf(o: Workload, kind: WorkloadKind): PodTemplate | undefined {
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
export function isInactive(o: Workload, kind: WorkloadKind): boolean {
  if (kind === 'CronJob' || kind === 'Job') return o.spec?.suspend === true;
  return replicasOf(o) === 0;
}

export const replicasOf = (o: Workload): number => o.spec?.replicas ?? 1;

/** §4.4 step 7d: suspend true -> false (CronJob, Job) or more replicas (the others). */
export function increasesActivity(o: Workload, old: Workload, kind: WorkloadKind): boolean {
  if (kind === 'CronJob' || kind === 'Job') return old.spec?.suspend === true && o.spec?.suspend !== true;
  if (kind === 'Pod' || kind === 'Other') return false;
  return replicasOf(o) > replicasOf(old);
}
