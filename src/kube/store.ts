// The informer's cache: a keyed object store with secondary indexes (O(1) lookups by index value), every
// index kept exact on every write. A pure data structure: no I/O, no clock.
import type { KubernetesObject } from '@kubernetes/client-node';

export type IndexFunc<T> = (obj: T) => readonly string[];

/** Name of the built-in index used by `list(namespace)`. */
export const NAMESPACE_INDEX = 'namespace';

interface Index<T> {
  fn: IndexFunc<T>;
  /** index value -> object keys */
  byValue: Map<string, Set<string>>;
}

/** A keyed object store with secondary indexes; every index is kept exact on every write. */
export class IndexedStore<T extends KubernetesObject> {
  readonly #items = new Map<string, T>();
  readonly #indexes = new Map<string, Index<T>>();
  /** object key -> index name -> values it is filed under (to unfile in O(values)). */
  readonly #filed = new Map<string, Map<string, readonly string[]>>();
  readonly #onIndexError: (index: string, err: unknown) => void;

  constructor(onIndexError: (index: string, err: unknown) => void = () => {}) {
    this.#onIndexError = onIndexError;
    this.addIndexer(NAMESPACE_INDEX, (obj) => [obj.metadata?.namespace ?? '']);
  }

  get size(): number {
    return this.#items.size;
  }

  get(key: string): T | undefined {
    return this.#items.get(key);
  }

  has(key: string): boolean {
    return this.#items.has(key);
  }

  keys(): string[] {
    return [...this.#items.keys()];
  }

  values(): T[] {
    return [...this.#items.values()];
  }

  entries(): IterableIterator<[string, T]> {
    return this.#items.entries();
  }

  /** Adds an index, filing every object already stored. Names are unique. */
  addIndexer(name: string, fn: IndexFunc<T>): void {
    if (this.#indexes.has(name)) throw new Error(`indexer "${name}" already exists`);
    const index: Index<T> = { fn, byValue: new Map() };
    this.#indexes.set(name, index);
    for (const [key, obj] of this.#items) this.#file(key, name, index, obj);
  }

  hasIndexer(name: string): boolean {
    return this.#indexes.has(name);
  }

  /** Keys of the objects filed under `value` in index `name`. Throws for an unknown index. */
  indexKeys(name: string, value: string): string[] {
    const set = this.#index(name).byValue.get(value);
    return set === undefined ? [] : [...set];
  }

  byIndex(name: string, value: string): T[] {
    const set = this.#index(name).byValue.get(value);
    if (set === undefined) return [];
    const out: T[] = [];
    for (const key of set) {
      const obj = this.#items.get(key);
      if (obj !== undefined) out.push(obj);
    }
    return out;
  }

  /** Values present in index `name`. */
  indexValues(name: string): string[] {
    return [...this.#index(name).byValue.keys()];
  }

  /** Stores `obj` under `key`, returning the previous object. */
  set(key: string, obj: T): T | undefined {
    const previous = this.#items.get(key);
    if (previous !== undefined) this.#unfileAll(key);
    this.#items.set(key, obj);
    for (const [name, index] of this.#indexes) this.#file(key, name, index, obj);
    return previous;
  }

  delete(key: string): T | undefined {
    const previous = this.#items.get(key);
    if (previous === undefined) return undefined;
    this.#unfileAll(key);
    this.#items.delete(key);
    return previous;
  }

  /** Replaces the whole content. */
  replace(entries: Iterable<[string, T]>): void {
    this.#items.clear();
    this.#filed.clear();
    for (const index of this.#indexes.values()) index.byValue.clear();
    for (const [key, obj] of entries) this.set(key, obj);
  }

  #index(name: string): Index<T> {
    const index = this.#indexes.get(name);
    if (index === undefined) throw new Error(`no indexer "${name}"`);
    return index;
  }

  #file(key: string, name: string, index: Index<T>, obj: T): void {
    let values: readonly string[];
    try {
      values = [...new Set(index.fn(obj))];
    } catch (err) {
      this.#onIndexError(name, err);
      values = [];
    }
    if (values.length === 0) return;
    for (const value of values) {
      let set = index.byValue.get(value);
      if (set === undefined) {
        set = new Set();
        index.byValue.set(value, set);
      }
      set.add(key);
    }
    let filed = this.#filed.get(key);
    if (filed === undefined) {
      filed = new Map();
      this.#filed.set(key, filed);
    }
    filed.set(name, values);
  }

  #unfileAll(key: string): void {
    const filed = this.#filed.get(key);
    if (filed === undefined) return;
    for (const [name, values] of filed) {
      const index = this.#indexes.get(name);
      if (index === undefined) continue;
      for (const value of values) {
        const set = index.byValue.get(value);
        set?.delete(key);
        if (set?.size === 0) index.byValue.delete(value);
      }
    }
    this.#filed.delete(key);
  }
}
