// The embedded central lease server the tests run the operators against, on a memory store that a test
// can take down (every call fails: the central answers 500 and readyz 503) and bring back.
import { MemoryStore } from '../../src/central/memstore.ts';
import type { LeaseKey, LeaseRecord } from '../../src/central/record.ts';
import { type CentralServer, startCentralServer } from '../../src/central/server.ts';
import type { Store } from '../../src/central/store.ts';
import type { Clock } from '../../src/kube/clock.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createRegistry } from '../../src/observability/metrics.ts';
import { centralTls } from './central-tls.ts';

/** A memory store that fails every call while `down` (the central answers 500 and readyz 503). */
export class OutageStore implements Store {
  readonly backend = 'outage';
  readonly inner = new MemoryStore();
  down = false;

  #check(): void {
    if (this.down) throw new Error('store unavailable');
  }
  async ping(): Promise<void> {
    this.#check();
  }
  async get(key: LeaseKey): Promise<LeaseRecord | undefined> {
    this.#check();
    return this.inner.get(key);
  }
  async list(): Promise<LeaseRecord[]> {
    this.#check();
    return this.inner.list();
  }
  async put(expectedVersion: number, record: LeaseRecord): Promise<LeaseRecord> {
    this.#check();
    return this.inner.put(expectedVersion, record);
  }
}

export interface Central {
  server: CentralServer;
  store: OutageStore;
  /** `https://127.0.0.1:<port>`. */
  url: string;
  /** The CA of its certificate, for child processes (this one trusts it: central-tls.ts). */
  caFile: string;
  stop(): Promise<void>;
}

export async function startCentral(clock?: Clock): Promise<Central> {
  const store = new OutageStore();
  const tls = await centralTls();
  const server = await startCentralServer({
    tls,
    store,
    logger: createLogger({ level: process.env.BERTH_TEST_LOGS ? 'debug' : 'silent' }),
    registry: createRegistry({ defaultMetrics: false }),
    gc: false,
    ...(clock === undefined ? {} : { clock }),
  });
  return { server, store, url: server.url, caFile: tls.caFile, stop: () => server.stop() };
}
