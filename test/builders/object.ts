// The base of the typed test builders (docs/testing.md, "Builders"): metadata setters shared by every kind,
// and the object returned as a fresh copy, so that one builder can stamp out many objects. In the spirit of
// Kueue's testingjobs wrappers: `new PodBuilder('web-1').namespace('shop').ownedBy(rs).obj()`.
import type { KubernetesObject, V1ObjectMeta, V1OwnerReference } from '@kubernetes/client-node';
import { type JsonObject, KINDS, type WorkloadKind } from '../../src/workloads/model.ts';

/**
 * A timestamp as it travels in the API's JSON: an RFC 3339 string. The client-node types say `Date`
 * (its deserializer converts them), but the code under test reads the JSON, so the builders keep strings.
 */
export const wireTime = (at: number | string): Date => rfc3339(at) as unknown as Date;

/** Milliseconds as Kubernetes writes a timestamp (whole seconds); a string is taken as it is. */
export const rfc3339 = (at: number | string): string =>
  typeof at === 'string' ? at : new Date(at).toISOString().replace(/\.\d+Z$/, 'Z');

/**
 * An owner named by its reference, or an object read back from the API server (with its name and uid; the
 * items of a LIST carry no kind: `{ ...item, kind: 'ReplicaSet' }`).
 */
export type Owner = { apiVersion?: string; kind: string; name: string; uid: string } | KubernetesObject;

const isWorkloadKind = (kind: string): kind is WorkloadKind => Object.hasOwn(KINDS, kind);

/** The controller reference a controller sets on what it creates (`controller` and `blockOwnerDeletion`). */
export function ownerReference(owner: Owner, over: Partial<V1OwnerReference> = {}): V1OwnerReference {
  const ref =
    'name' in owner
      ? owner
      : {
          apiVersion: owner.apiVersion,
          kind: owner.kind,
          name: owner.metadata?.name,
          uid: owner.metadata?.uid,
        };
  const { kind, name, uid } = ref;
  if (kind === undefined || name === undefined || uid === undefined)
    throw new Error(`an owner needs a kind, a name and a uid: ${JSON.stringify(ref)}`);
  const apiVersion = ref.apiVersion ?? (isWorkloadKind(kind) ? KINDS[kind].apiVersion : undefined);
  if (apiVersion === undefined) throw new Error(`the apiVersion of an owner of kind ${kind} is needed`);
  return { apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true, ...over };
}

/** The metadata fields every builder sets, kept apart so that obj() writes them in one order. */
export interface Meta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: V1OwnerReference[];
  finalizers?: string[];
  deletionTimestamp?: string;
}

export abstract class ObjectBuilder<T> {
  protected readonly meta: Meta;

  /** `{ generateName }`: a name the API server completes (`<prefix><random>`). */
  constructor(name: string | { generateName: string }) {
    this.meta = typeof name === 'string' ? { name } : { generateName: name.generateName };
  }

  namespace(namespace: string): this {
    this.meta.namespace = namespace;
    return this;
  }

  uid(uid: string): this {
    this.meta.uid = uid;
    return this;
  }

  generation(generation: number): this {
    this.meta.generation = generation;
    return this;
  }

  resourceVersion(resourceVersion: string): this {
    this.meta.resourceVersion = resourceVersion;
    return this;
  }

  /** Adds labels (later ones win). */
  labels(labels: Record<string, string>): this {
    this.meta.labels = { ...this.meta.labels, ...labels };
    return this;
  }

  /** Adds annotations (later ones win). */
  annotations(annotations: Record<string, string>): this {
    this.meta.annotations = { ...this.meta.annotations, ...annotations };
    return this;
  }

  /** Adds the controller reference of `owner` (see ownerReference). */
  ownedBy(owner: Owner, over: Partial<V1OwnerReference> = {}): this {
    this.meta.ownerReferences = [...(this.meta.ownerReferences ?? []), ownerReference(owner, over)];
    return this;
  }

  finalizers(...finalizers: string[]): this {
    this.meta.finalizers = finalizers;
    return this;
  }

  /** Being deleted: deletionTimestamp `at` (an RFC 3339 string or milliseconds). */
  deleting(at: number | string): this {
    this.meta.deletionTimestamp = rfc3339(at);
    return this;
  }

  /** The object, a fresh copy each call. */
  abstract obj(): T;

  /** The object as plain JSON, as a webhook or the API server's client sees it. */
  json(): JsonObject {
    return JSON.parse(JSON.stringify(this.obj()));
  }

  /** The metadata as client-node types it (see wireTime). */
  protected metadata(): V1ObjectMeta {
    const { deletionTimestamp, ...m } = this.jsonMetadata();
    return deletionTimestamp === undefined ? m : { ...m, deletionTimestamp: wireTime(deletionTimestamp) };
  }

  /** The metadata in one order, whatever order the setters were called in. */
  protected jsonMetadata(): Meta {
    const m = structuredClone(this.meta);
    const out: Meta = {};
    if (m.name !== undefined) out.name = m.name;
    if (m.generateName !== undefined) out.generateName = m.generateName;
    if (m.namespace !== undefined) out.namespace = m.namespace;
    if (m.uid !== undefined) out.uid = m.uid;
    if (m.generation !== undefined) out.generation = m.generation;
    if (m.resourceVersion !== undefined) out.resourceVersion = m.resourceVersion;
    if (m.labels !== undefined) out.labels = m.labels;
    if (m.annotations !== undefined) out.annotations = m.annotations;
    if (m.ownerReferences !== undefined) out.ownerReferences = m.ownerReferences;
    if (m.finalizers !== undefined) out.finalizers = m.finalizers;
    if (m.deletionTimestamp !== undefined) out.deletionTimestamp = m.deletionTimestamp;
    return out;
  }
}
