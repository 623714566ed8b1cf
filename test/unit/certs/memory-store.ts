// An in-memory CaStore with the Secret's semantics (resourceVersion, AlreadyExists, 409 on a stale
// replace), plus knobs to make it fail, for driving the selfsigned provider without an API server.
import type { CaData, CaStore, StoredCa } from '../../../certs/ca-store.ts';

export class MemoryCaStore implements CaStore {
  readonly description = 'memory store';
  #data: CaData | undefined;
  #rv = 0;
  /** Set to make every call reject with this error (an unreachable API server). */
  failWith: Error | undefined;
  readonly calls = { read: 0, create: 0, exists: 0, replace: 0, conflict: 0 };

  async read(): Promise<StoredCa | undefined> {
    this.calls.read++;
    this.#check();
    return this.#stored();
  }

  async create(data: CaData): Promise<StoredCa | 'exists'> {
    this.calls.create++;
    this.#check();
    if (this.#data !== undefined) {
      this.calls.exists++;
      return 'exists';
    }
    return this.put(data);
  }

  async replace(data: CaData, resourceVersion: string): Promise<StoredCa | 'conflict'> {
    this.calls.replace++;
    this.#check();
    if (this.#data === undefined || resourceVersion !== String(this.#rv)) {
      this.calls.conflict++;
      return 'conflict';
    }
    return this.put(data);
  }

  /** Writes as another party would (no precondition). */
  put(data: CaData): StoredCa {
    this.#data = { ...data };
    this.#rv++;
    return this.#stored()!;
  }

  delete(): void {
    this.#data = undefined;
  }

  get data(): CaData | undefined {
    return this.#data === undefined ? undefined : { ...this.#data };
  }

  #stored(): StoredCa | undefined {
    return this.#data === undefined
      ? undefined
      : { data: { ...this.#data }, resourceVersion: String(this.#rv) };
  }

  #check(): void {
    if (this.failWith !== undefined) throw this.failWith;
  }
}
