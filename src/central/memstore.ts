// In-memory Store: one process, lost on restart (`--store-backend mem` in the Go server). Records are
// copied in and out so callers can never mutate stored state.
import { cloneRecord, type LeaseKey, type LeaseRecord } from './record.ts';
import { type Store, StoreConflictError } from './store.ts';

// The JSON pair is injective (unlike joining with a separator that may appear in a name).
const mapKey = (key: LeaseKey): string => JSON.stringify([key.namespace, key.name]);

export class MemoryStore implements Store {
  readonly backend = 'mem';
  readonly #records = new Map<string, LeaseRecord>();

  async ping(): Promise<void> {}

  async get(key: LeaseKey): Promise<LeaseRecord | undefined> {
    const record = this.#records.get(mapKey(key));
    return record === undefined ? undefined : cloneRecord(record);
  }

  async list(): Promise<LeaseRecord[]> {
    return [...this.#records.values()].map(cloneRecord);
  }

  async put(expectedVersion: number, record: LeaseRecord): Promise<LeaseRecord> {
    const k = mapKey(record.key);
    const current = this.#records.get(k);
    const currentVersion = current?.version ?? 0;
    if (currentVersion !== expectedVersion) {
      throw new StoreConflictError(
        current === undefined
          ? `lease store: ${record.key.namespace}/${record.key.name} does not exist`
          : `lease store: ${record.key.namespace}/${record.key.name} is at version ${currentVersion}, not ${expectedVersion}`,
      );
    }
    const stored = { ...cloneRecord(record), version: expectedVersion + 1 };
    this.#records.set(k, stored);
    return cloneRecord(stored);
  }
}
