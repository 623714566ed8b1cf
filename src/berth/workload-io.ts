// The managed-workload path's Kubernetes edge: direct (uncached) reads and guarded writes of targets,
// their owner chains, Pods and Jobs. Reads never come from an informer cache (ownership decisions are
// made on them, docs/behaviour.md §2.1) and LISTs carry no resourceVersion, so they are consistent reads. Every
// write is guarded: merge patches name `metadata.resourceVersion` (and `metadata.uid`), deletes carry a
// UID precondition. Objects are parsed leniently (only the fields the managed path reads are typed).
import { z } from 'zod';
import {
  isConflict,
  isNotFound,
  type KubeRequester,
  readJson,
  resourcePath,
  statusOf,
} from '../kube/client.ts';

// ---- the objects, as far as the managed path reads them ----

const stringMap = z.record(z.string(), z.string());

const ownerReferenceSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.string(),
  name: z.string(),
  uid: z.string(),
  controller: z.boolean().nullish(),
});
export type OwnerReference = z.infer<typeof ownerReferenceSchema>;

const metaSchema = z.looseObject({
  name: z.string(),
  namespace: z.string().nullish(),
  uid: z.string().nullish(),
  resourceVersion: z.string().nullish(),
  creationTimestamp: z.string().nullish(),
  deletionTimestamp: z.string().nullish(),
  labels: stringMap.nullish(),
  annotations: stringMap.nullish(),
  ownerReferences: z.array(ownerReferenceSchema).nullish(),
  finalizers: z.array(z.string()).nullish(),
});

export const kubeObjectSchema = z.looseObject({
  apiVersion: z.string().nullish(),
  kind: z.string().nullish(),
  metadata: metaSchema,
  spec: z
    .looseObject({
      replicas: z.number().nullish(),
      suspend: z.boolean().nullish(),
      nodeName: z.string().nullish(),
      schedulingGates: z.array(z.looseObject({ name: z.string() })).nullish(),
    })
    .nullish(),
  status: z.looseObject({ phase: z.string().nullish() }).nullish(),
});
/** A Pod, Job or workload: metadata, and the few spec/status fields the managed path reads. */
export type KubeObj = z.infer<typeof kubeObjectSchema>;

export function parseKubeObject(json: unknown, what: string): KubeObj {
  const parsed = kubeObjectSchema.safeParse(json);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new Error(
    `${what} is malformed: ${issue?.path.join('.') || 'object'}: ${issue?.message ?? 'invalid'}`,
  );
}

// ---- kinds ----

/** The kinds the managed path reads or writes. */
export type WorkloadKind = 'Deployment' | 'StatefulSet' | 'ReplicaSet' | 'CronJob' | 'Job' | 'Pod';

export interface KindInfo {
  apiVersion: string;
  group: string;
  version: string;
  plural: string;
}

export const KINDS: Record<WorkloadKind, KindInfo> = {
  Deployment: { apiVersion: 'apps/v1', group: 'apps', version: 'v1', plural: 'deployments' },
  StatefulSet: { apiVersion: 'apps/v1', group: 'apps', version: 'v1', plural: 'statefulsets' },
  ReplicaSet: { apiVersion: 'apps/v1', group: 'apps', version: 'v1', plural: 'replicasets' },
  CronJob: { apiVersion: 'batch/v1', group: 'batch', version: 'v1', plural: 'cronjobs' },
  Job: { apiVersion: 'batch/v1', group: 'batch', version: 'v1', plural: 'jobs' },
  Pod: { apiVersion: 'v1', group: '', version: 'v1', plural: 'pods' },
};

/** The kind of an `apiVersion`/`kind` pair the managed path handles (group match, any version), if any. */
export function kindOf(apiVersion: string, kind: string): WorkloadKind | undefined {
  const info = KINDS[kind as WorkloadKind];
  if (info === undefined) return undefined;
  const slash = apiVersion.indexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash);
  return group === info.group ? (kind as WorkloadKind) : undefined;
}

/** `deployments.apps "web"`, as Kubernetes names an object in its messages. */
export function qualifiedName(kind: WorkloadKind, name: string): string {
  const info = KINDS[kind];
  return `${info.plural}${info.group ? `.${info.group}` : ''} ${JSON.stringify(name)}`;
}

export type DeleteOutcome = 'deleted' | 'gone';

export interface WorkloadApi {
  /** GET; undefined when it does not exist. */
  get(
    kind: WorkloadKind,
    namespace: string,
    name: string,
    signal?: AbortSignal,
  ): Promise<KubeObj | undefined>;
  /** LIST in one namespace, optionally by label selector. */
  list(
    kind: WorkloadKind,
    namespace: string,
    labelSelector?: string,
    signal?: AbortSignal,
  ): Promise<KubeObj[]>;
  /** JSON merge patch; the caller puts `metadata.resourceVersion` (and uid) in it as the guard. */
  mergePatch(
    kind: WorkloadKind,
    namespace: string,
    name: string,
    patch: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<KubeObj>;
  /**
   * DELETE with a UID precondition (background propagation). `gone` when the object no longer exists or
   * the name now belongs to another object (that one is not ours to delete).
   */
  delete(
    kind: WorkloadKind,
    namespace: string,
    name: string,
    uid: string,
    signal?: AbortSignal,
  ): Promise<DeleteOutcome>;
}

const objectPath = (kind: WorkloadKind, namespace: string, name?: string): string => {
  const info = KINDS[kind];
  const base = resourcePath({ group: info.group, version: info.version, plural: info.plural, namespace });
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
};

/** The API server as a WorkloadApi (through the operator's transport and identity). */
export function kubeWorkloadApi(transport: KubeRequester): WorkloadApi {
  const opt = (signal: AbortSignal | undefined) => (signal === undefined ? {} : { signal });
  return {
    async get(kind, namespace, name, signal) {
      try {
        const json = await readJson<unknown>(
          await transport.request({ path: objectPath(kind, namespace, name), ...opt(signal) }),
        );
        return parseKubeObject(json, qualifiedName(kind, name));
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    async list(kind, namespace, labelSelector, signal) {
      const json = await readJson<{ items?: unknown[] }>(
        await transport.request({
          path: objectPath(kind, namespace),
          query: { labelSelector },
          ...opt(signal),
        }),
      );
      return (json.items ?? []).map((item) => parseKubeObject(item, `${KINDS[kind].plural} list item`));
    },
    async mergePatch(kind, namespace, name, patch, signal) {
      const json = await readJson<unknown>(
        await transport.request({
          method: 'PATCH',
          path: objectPath(kind, namespace, name),
          body: patch,
          contentType: 'application/merge-patch+json',
          ...opt(signal),
        }),
      );
      return parseKubeObject(json, qualifiedName(kind, name));
    },
    async delete(kind, namespace, name, uid, signal) {
      try {
        await readJson<unknown>(
          await transport.request({
            method: 'DELETE',
            path: objectPath(kind, namespace, name),
            body: {
              kind: 'DeleteOptions',
              apiVersion: 'v1',
              preconditions: { uid },
              propagationPolicy: 'Background',
            },
            ...opt(signal),
          }),
        );
        return 'deleted';
      } catch (err) {
        // 409 on a delete is the UID precondition: the name belongs to a newer object now.
        if (isNotFound(err) || isConflict(err)) return 'gone';
        throw err;
      }
    },
  };
}

// ---- accessors ----

export const annotationsOf = (o: KubeObj): Record<string, string> => o.metadata.annotations ?? {};
export const labelsOf = (o: KubeObj): Record<string, string> => o.metadata.labels ?? {};
export const uidOf = (o: KubeObj): string => o.metadata.uid ?? '';
export const isDeletingObject = (o: KubeObj): boolean => !!o.metadata.deletionTimestamp;
export const gatesOf = (o: KubeObj): string[] => (o.spec?.schedulingGates ?? []).map((g) => g.name);

/** A Pod that finished: it runs nothing any more. */
export const isTerminalPod = (pod: KubeObj): boolean =>
  pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';

/** The first ownerReference with controller: true (metav1.GetControllerOf). */
export const controllerOf = (o: KubeObj): OwnerReference | undefined =>
  (o.metadata.ownerReferences ?? []).find((r) => r.controller === true);

/** The API message of an error (what `kubectl` prints), without headers or bodies. */
export function apiMessage(err: unknown): string {
  const message = statusOf(err)?.message;
  if (message) return message;
  return err instanceof Error ? err.message : String(err);
}
