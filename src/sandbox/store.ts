// Versioned object storage with a bounded change history: the sandbox's etcd. One global, monotonic
// resourceVersion orders every write; watches replay the history from a resourceVersion and get 410
// Gone once it has been compacted away.
import type { KubeObject } from './types.ts';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface Change {
  rv: number;
  type: ChangeType;
  typeKey: string;
  object: KubeObject;
  /** The object before a MODIFIED or DELETED change, for selector transitions. */
  previous: KubeObject | undefined;
}

export type ChangeListener = (change: Change) => void;

export const objectKey = (namespace: string | undefined, name: string): string =>
  `${namespace ?? ''}/${name}`;

export class Store {
  private rv = 1;
  private readonly data = new Map<string, Map<string, KubeObject>>();
  private readonly history: Change[] = [];
  /** Changes with rv <= compactedRv are no longer in the history. */
  private compactedRv = 1;
  private readonly listeners = new Set<ChangeListener>();

  private readonly historyLimit: number;

  constructor(historyLimit: number) {
    this.historyLimit = historyLimit;
  }

  currentRv(): number {
    return this.rv;
  }

  oldestRetainedRv(): number {
    return this.compactedRv;
  }

  get(typeKey: string, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.data.get(typeKey)?.get(objectKey(namespace, name));
  }

  /** Objects of a type, optionally in one namespace, sorted by key as etcd returns them. */
  list(typeKey: string, namespace?: string): KubeObject[] {
    const bucket = this.data.get(typeKey);
    if (!bucket) return [];
    const out: KubeObject[] = [];
    if (namespace) {
      const prefix = `${namespace}/`;
      for (const [key, obj] of bucket) if (key.startsWith(prefix)) out.push(obj);
    } else {
      out.push(...bucket.values());
    }
    return out.sort((a, b) => compareKeys(a, b));
  }

  count(typeKey: string): number {
    return this.data.get(typeKey)?.size ?? 0;
  }

  /** Writes an object, stamping the next resourceVersion on it. The object must not be mutated afterwards. */
  put(typeKey: string, object: KubeObject): KubeObject {
    const bucket = this.bucket(typeKey);
    const key = objectKey(object.metadata.namespace, object.metadata.name ?? '');
    const previous = bucket.get(key);
    const rv = ++this.rv;
    object.metadata.resourceVersion = String(rv);
    bucket.set(key, object);
    this.record({ rv, type: previous ? 'MODIFIED' : 'ADDED', typeKey, object, previous });
    return object;
  }

  /** Removes an object; the DELETED change carries a fresh resourceVersion like kube-apiserver's. */
  remove(typeKey: string, object: KubeObject): KubeObject | undefined {
    const bucket = this.bucket(typeKey);
    const key = objectKey(object.metadata.namespace, object.metadata.name ?? '');
    const previous = bucket.get(key);
    if (!previous) return undefined;
    bucket.delete(key);
    const rv = ++this.rv;
    const deleted: KubeObject = {
      ...previous,
      metadata: { ...previous.metadata, resourceVersion: String(rv) },
    };
    this.record({ rv, type: 'DELETED', typeKey, object: deleted, previous });
    return deleted;
  }

  /** Changes of one type after `rv`, or 'expired' when part of that range has been compacted. */
  changesSince(rv: number, typeKey: string): Change[] | 'expired' {
    if (rv < this.compactedRv) return 'expired';
    const out: Change[] = [];
    // History is ordered by rv: binary search for the first change after rv.
    let lo = 0;
    let hi = this.history.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.history[mid]?.rv ?? 0) <= rv) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < this.history.length; i++) {
      const change = this.history[i]!;
      if (change.typeKey === typeKey) out.push(change);
    }
    return out;
  }

  /** Drops the whole history, as an etcd compaction at the current revision would. */
  compact(): void {
    this.history.length = 0;
    this.compactedRv = this.rv;
  }

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private bucket(typeKey: string): Map<string, KubeObject> {
    let bucket = this.data.get(typeKey);
    if (!bucket) {
      bucket = new Map();
      this.data.set(typeKey, bucket);
    }
    return bucket;
  }

  private record(change: Change): void {
    this.history.push(change);
    // Trim in batches so a long stream of writes does not shift the array on every change.
    if (this.history.length > this.historyLimit + Math.max(64, this.historyLimit >> 3)) {
      const drop = this.history.length - this.historyLimit;
      this.compactedRv = this.history[drop - 1]!.rv;
      this.history.splice(0, drop);
    }
    for (const listener of this.listeners) listener(change);
  }
}

function compareKeys(a: KubeObject, b: KubeObject): number {
  const ka = objectKey(a.metadata.namespace, a.metadata.name ?? '');
  const kb = objectKey(b.metadata.namespace, b.metadata.name ?? '');
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}
