// A MemoryStore whose calls can be intercepted: a hook runs before the call (and may throw), which lets
// tests land a competing write between a read and its compare-and-swap.
import { MemoryStore } from '../../../src/central/memstore.ts';
import type { LeaseKey, LeaseRecord } from '../../../src/central/record.ts';
import type { Store } from '../../../src/central/store.ts';

type Hook = () => void | Promise<void>;

export class HookedStore implements Store {
  readonly backend = 'hooked';
  readonly inner = new MemoryStore();
  readonly calls: string[] = [];
  #hooks: Record<'get' | 'put' | 'list' | 'ping', Hook[]> = { get: [], put: [], list: [], ping: [] };

  /** Runs `hook` once, before the next call of `op`. */
  once(op: 'get' | 'put' | 'list' | 'ping', hook: Hook): void {
    this.#hooks[op].push(hook);
  }

  async #before(op: 'get' | 'put' | 'list' | 'ping'): Promise<void> {
    this.calls.push(op);
    const hook = this.#hooks[op].shift();
    await hook?.();
  }

  async ping(): Promise<void> {
    await this.#before('ping');
  }

  async get(key: LeaseKey): Promise<LeaseRecord | undefined> {
    await this.#before('get');
    return this.inner.get(key);
  }

  async list(): Promise<LeaseRecord[]> {
    await this.#before('list');
    return this.inner.list();
  }

  async put(expectedVersion: number, record: LeaseRecord): Promise<LeaseRecord> {
    await this.#before('put');
    return this.inner.put(expectedVersion, record);
  }
}
