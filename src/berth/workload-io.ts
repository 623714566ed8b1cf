// The managed-workload path's Kubernetes edge: direct (uncached) reads and guarded writes of targets,
// their owner chains, Pods and Jobs. Reads never come from an informer cache (ownership decisions are
// made on them, docs/behaviour.md §2.1) and LISTs carry no resourceVersion, so they are consistent reads. Every
// write is guarded: merge patches name `metadata.resourceVersion` (and `metadata.uid`), deletes carry a
// UID precondition. Objects are parsed with the workload model's one parser (src/workloads/model.ts).
import { isConflict, isNotFound, readJson, statusOf } from '../kube/client.ts';
import type { KubeRequester } from '../kube/transport.ts';
import {
  KINDS,
  parseStoredWorkload,
  qualifiedName,
  type StoredWorkload,
  type WorkloadKind,
} from '../workloads/model.ts';
import { workloadPath } from '../workloads/paths.ts';

/** A Pod, Job or workload as the managed path reads it from the API server or its caches. */
export type KubeObj = StoredWorkload;

/** An object read from the API server; throws when it does not fit the model. */
export function parseKubeObject(json: unknown, what: string): KubeObj {
  const parsed = parseStoredWorkload(json);
  if (parsed.ok) return parsed.value;
  throw new Error(`${what} is malformed: ${parsed.error}`);
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
   * DELETE with a UID precondition (background propagation) and, when given, `gracePeriodSeconds` (a
   * Pod's termination grace; shortens that of a Pod already terminating). `gone` when the object no
   * longer exists or the name now belongs to another object (that one is not ours to delete).
   */
  delete(
    kind: WorkloadKind,
    namespace: string,
    name: string,
    uid: string,
    signal?: AbortSignal,
    gracePeriodSeconds?: number,
  ): Promise<DeleteOutcome>;
}

/** The API server as a WorkloadApi (through the operator's transport and identity). */
export function kubeWorkloadApi(transport: KubeRequester): WorkloadApi {
  const opt = (signal: AbortSignal | undefined) => (signal === undefined ? {} : { signal });
  return {
    async get(kind, namespace, name, signal) {
      try {
        const json = await readJson<unknown>(
          await transport.request({ path: workloadPath(kind, namespace, name), ...opt(signal) }),
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
          path: workloadPath(kind, namespace),
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
          path: workloadPath(kind, namespace, name),
          body: patch,
          contentType: 'application/merge-patch+json',
          ...opt(signal),
        }),
      );
      return parseKubeObject(json, qualifiedName(kind, name));
    },
    async delete(kind, namespace, name, uid, signal, gracePeriodSeconds) {
      try {
        await readJson<unknown>(
          await transport.request({
            method: 'DELETE',
            path: workloadPath(kind, namespace, name),
            body: {
              kind: 'DeleteOptions',
              apiVersion: 'v1',
              preconditions: { uid },
              propagationPolicy: 'Background',
              ...(gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds }),
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

/** The API message of an error (what `kubectl` prints), without headers or bodies. */
export function apiMessage(err: unknown): string {
  const message = statusOf(err)?.message;
  if (message) return message;
  return err instanceof Error ? err.message : String(err);
}
