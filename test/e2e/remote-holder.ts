// Another cluster's operator as the central lease API sees it, for the single-cluster scenarios: a holder
// with its own identity that acquires the same lease (namespace + leaseName) and keeps it by acquiring
// every heartbeat, exactly the calls a remote BerthLease reconciler makes. It can crash (stop renewing, so
// the lease expires after its TTL) or release.
import { type AcquireResult, HttpLeaseClient } from '../../src/berth/leaseclient.ts';
import { createLogger } from '../../src/observability/logger.ts';

export interface RemoteHolderOptions {
  centralUrl: string;
  namespace: string;
  leaseName: string;
  holder: string;
  ttlSeconds: number;
  heartbeatMs: number;
}

export class RemoteHolder {
  readonly holder: string;
  readonly #o: RemoteHolderOptions;
  readonly #client: HttpLeaseClient;
  #timer: NodeJS.Timeout | undefined;
  #last: AcquireResult | undefined;
  /** performance.now() when an acquire first came back acquired (after the response arrived). */
  #heldSince: number | undefined;
  #heartbeats = 0;
  #error: unknown;
  #inflight: Promise<unknown> = Promise.resolve();

  constructor(o: RemoteHolderOptions) {
    this.#o = o;
    this.holder = o.holder;
    this.#client = new HttpLeaseClient({ baseUrl: o.centralUrl, logger: createLogger({ level: 'silent' }) });
  }

  /** The latest answer of the central API. */
  get last(): AcquireResult | undefined {
    return this.#last;
  }

  get heldSince(): number | undefined {
    return this.#heldSince;
  }

  /** Successful heartbeats while holding. */
  get heartbeats(): number {
    return this.#heartbeats;
  }

  /** One acquire (renews in place while we hold it). */
  async acquire(): Promise<AcquireResult> {
    const { namespace, leaseName, holder, ttlSeconds } = this.#o;
    const res = await this.#client.acquire(namespace, leaseName, holder, ttlSeconds);
    this.#last = res;
    if (res.acquired) {
      this.#heldSince ??= performance.now();
      this.#heartbeats++;
    } else this.#heldSince = undefined;
    return res;
  }

  /** Acquires every heartbeat from now on: holds the lease, or takes it as soon as it is free. */
  keepAcquiring(): void {
    if (this.#timer) return;
    const beat = (): void => {
      this.#inflight = this.acquire()
        .catch((err: unknown) => {
          this.#error = err;
        })
        .finally(() => {
          if (this.#timer) this.#timer = setTimeout(beat, this.#o.heartbeatMs);
        });
    };
    this.#timer = setTimeout(beat, 0);
  }

  /**
   * Stops acquiring without releasing, once a heartbeat in flight is answered: as a crashed cluster, the
   * lease expires after its TTL.
   */
  async crash(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#inflight;
  }

  /** Stops acquiring and releases the lease if held. */
  async release(): Promise<void> {
    await this.crash();
    const last = this.#last;
    if (last?.acquired)
      await this.#client.release(this.#o.namespace, this.#o.leaseName, this.holder, last.fencingToken);
    this.#heldSince = undefined;
  }

  /** The last heartbeat error, for failure messages. */
  get error(): unknown {
    return this.#error;
  }

  async close(): Promise<void> {
    await this.crash();
    this.#client.close();
  }
}
