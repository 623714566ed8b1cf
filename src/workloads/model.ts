// The workload objects both the reconciler's managed path and WorkloadAdmission read: the kinds (where
// each is served) and one lenient zod schema of the fields either reads.
// Domain-free: nothing here knows BerthLeases (docs/architecture.md, "Packages"). Pure, and imports only
// zod: src/berth/api.ts takes the owner-chain messages from this package, and what imports api.ts must not
// load a Kubernetes client.
import { z } from 'zod';

export type JsonObject = Record<string, unknown>;

// ---- kinds ----

/** The kinds that can be managed: the targets, their descendants and Pods. */
export type WorkloadKind = 'Deployment' | 'StatefulSet' | 'ReplicaSet' | 'CronJob' | 'Job' | 'Pod';
/** The kinds whose controller ownerReference an owner chain follows (docs/behaviour.md §4.3 step 2). */
export type OwnerKind = Exclude<WorkloadKind, 'Pod'>;

export interface KindInfo {
  /** Where objects of the kind are read and written: always the v1 of the group. */
  apiVersion: string;
  group: string;
  version: string;
  plural: string;
}

/** In the order the install's RBAC rules list them (scripts/deploy-rbac.ts). */
export const KINDS: Readonly<Record<WorkloadKind, KindInfo>> = {
  Deployment: { apiVersion: 'apps/v1', group: 'apps', version: 'v1', plural: 'deployments' },
  StatefulSet: { apiVersion: 'apps/v1', group: 'apps', version: 'v1', plural: 'statefulsets' },
  ReplicaSet: { apiVersion: 'apps/v1', group: 'apps', version: 'v1', plural: 'replicasets' },
  Job: { apiVersion: 'batch/v1', group: 'batch', version: 'v1', plural: 'jobs' },
  CronJob: { apiVersion: 'batch/v1', group: 'batch', version: 'v1', plural: 'cronjobs' },
  Pod: { apiVersion: 'v1', group: '', version: 'v1', plural: 'pods' },
};

export const groupOf = (apiVersion: string): string => {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
};

/**
 * The kind of a group and kind name, if it is one of ours. By group, any version: matchPolicy
 * Equivalent may send another version of the same resource, and an ownerReference may name one.
 */
export function kindInGroup(group: string, kind: string): WorkloadKind | undefined {
  if (!Object.hasOwn(KINDS, kind)) return undefined;
  return KINDS[kind as WorkloadKind].group === group ? (kind as WorkloadKind) : undefined;
}

/** The kind of an `apiVersion`/`kind` pair, if it is one of ours. */
export const kindOf = (apiVersion: string, kind: string): WorkloadKind | undefined =>
  kindInGroup(groupOf(apiVersion), kind);

export const isOwnerKind = (kind: string | undefined): kind is OwnerKind =>
  kind !== undefined && kind !== 'Pod' && Object.hasOwn(KINDS, kind);

/** `deployments.apps "web"`, as Kubernetes names an object in its messages (`... not found`). */
export function qualifiedName(kind: WorkloadKind, name: string): string {
  const info = KINDS[kind];
  return `${info.plural}${info.group ? `.${info.group}` : ''} ${JSON.stringify(name)}`;
}

// ---- the schema: the shapes kube sends, with null accepted wherever Go may write it ----

const stringMap = z.record(z.string(), z.string());

export const ownerReferenceSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: z.boolean().nullish(),
});
export type OwnerReference = z.infer<typeof ownerReferenceSchema>;

export const metadataSchema = z.looseObject({
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

const gatesSchema = z.array(z.looseObject({ name: z.string() })).nullish();

const templateSchema = z.looseObject({
  metadata: metadataSchema.nullish(),
  spec: z.looseObject({ nodeName: z.string().nullish(), schedulingGates: gatesSchema }).nullish(),
});
export type PodTemplate = z.infer<typeof templateSchema>;

/** A union of the fields of every kind; each kind only uses its own. */
export const workloadSchema = z.looseObject({
  apiVersion: z.string().nullish(),
  kind: z.string().nullish(),
  metadata: metadataSchema.nullish(),
  spec: z
    .looseObject({
      // Pod
      nodeName: z.string().nullish(),
      schedulingGates: gatesSchema,
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

/**
 * A workload read back from the API server (by the reconciler's managed path): it always has its name,
 * and two fields only the reconciler reads are typed too. Admission does not check them: a review is
 * refused only for what its rules read.
 */
export type StoredWorkload = Workload & {
  metadata: Metadata & { name: string; creationTimestamp?: string | null };
  status?: { phase?: string | null; [key: string]: unknown } | null;
};

export type ParseResult<T = Workload> = { ok: true; value: T } | { ok: false; error: string };

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const nullishString = (v: unknown): boolean => v === undefined || v === null || typeof v === 'string';

/** The one parser of workload objects; the error names the first field that is wrong. */
export function parseWorkload(raw: unknown): ParseResult {
  const parsed = workloadSchema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, error: `${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}` };
}

const isStored = (w: Workload): w is StoredWorkload =>
  typeof w.metadata?.name === 'string' &&
  nullishString(w.metadata.creationTimestamp) &&
  (w.status === undefined || w.status === null || (isObject(w.status) && nullishString(w.status.phase)));

/** parseWorkload for an object read from the API server: its name, creation time and phase too. */
export function parseStoredWorkload(raw: unknown): ParseResult<StoredWorkload> {
  const parsed = parseWorkload(raw);
  if (!parsed.ok) return parsed;
  if (isStored(parsed.value)) return { ok: true, value: parsed.value };
  const m = parsed.value.metadata;
  const field =
    typeof m?.name !== 'string'
      ? 'metadata.name'
      : nullishString(m.creationTimestamp)
        ? 'status.phase'
        : 'metadata.creationTimestamp';
  return { ok: false, error: `${field}: missing or not a string` };
}

// ---- accessors ----

/** The first ownerReference with controller: true (metav1.GetControllerOf). */
export const controllerOf = (o: Workload): OwnerReference | undefined =>
  (o.metadata?.ownerReferences ?? []).find((r) => r.controller === true);

export const ownerReferencesOf = (o: Workload | null | undefined): OwnerReference[] =>
  o?.metadata?.ownerReferences ?? [];
