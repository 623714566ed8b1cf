// A Store wrapper whose next put can be held at the door: races between replicas are replayed in a
// chosen landing order against any backend (both writers have read, neither has written yet).
import type { LeaseKey, LeaseRecord } from '../../../src/central/record.ts';
import type { Store } from '../../../src/central/store.ts';

export interface HeldPut {
  /** Resolves once the held put is waiting (its caller has finished deciding). */
  arrived: Promise<void>;
  /** Lets the put through; resolves when it has settled (landed or been refused). */
  release(): Promise<void>;
}

export class HoldableStore implements Store {
  readonly #inner: Store;
  #held: Array<{ arrive: () => void; gate: Promise<void>; settled: PromiseWithResolvers<void> }> = [];

  constructor(inner: Store) {
    this.#inner = inner;
  }

  get backend(): string {
    return this.#inner.backend;
  }

  /** Holds the next put through this wrapper. */
  holdNextPut(): HeldPut {
    const arrived = Promise.withResolvers<void>();
    const gate = Promise.withResolvers<void>();
    const settled = Promise.withResolvers<void>();
    this.#held.push({ arrive: arrived.resolve, gate: gate.promise, settled });
    return {
      arrived: arrived.promise,
      release: async () => {
        gate.resolve();
        await settled.promise;
      },
    };
  }

  ping(signal?: AbortSignal): Promise<void> {
    return this.#inner.ping(signal);
  }

  get(key: LeaseKey): Promise<LeaseRecord | undefined> {
    return this.#inner.get(key);
  }

  list(): Promise<LeaseRecord[]> {
    return this.#inner.list();
  }

  async put(expectedVersion: number, record: LeaseRecord): Promise<LeaseRecord> {
    const hold = this.#held.shift();
    if (hold === undefined) return this.#inner.put(expectedVersion, record);
    hold.arrive();
    await hold.gate;
    try {
      return await this.#inner.put(expectedVersion, record);
    } finally {
      // After the caller's continuation has had a chance to see the outcome.
      setImmediate(() => hold.settled.resolve());
    }
  }
}
