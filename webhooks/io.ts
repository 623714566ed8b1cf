// The I/O WorkloadAdmission needs, as a small interface: direct (uncached) reads of BerthLeases, owners,
// targets and Pods, and the one write (BerthLease status at the target's final CREATE). The decisions take
// it as a parameter, so unit tests pass an in-memory fake; kube-io.ts implements it over the API server.
import type { JsonObject, WorkloadKind } from '../src/workloads/model.ts';
import type { ReviewKind } from './workload.ts';

export type { JsonObject };

export interface LeaseList {
  items: JsonObject[];
  /** False when the server has more items than were returned (a `continue` token came back). */
  complete: boolean;
}

export interface AdmissionIO {
  /**
   * LIST of BerthLeases in a namespace, read from the API server's storage (no resourceVersion, so never
   * served from a watch cache). `limit` bounds the items returned; without it, every item.
   */
  listLeases(namespace: string, limit?: number): Promise<LeaseList>;
  /** GET of one BerthLease; undefined when it does not exist. */
  getLease(namespace: string, name: string): Promise<JsonObject | undefined>;
  /** GET of a Pod or a workload of a handled kind; undefined when it does not exist. */
  getWorkload(kind: ReviewKind, namespace: string, name: string): Promise<JsonObject | undefined>;
  /**
   * The first object of `kind` in the namespace carrying the `managed-lease-uid` stamp label, if any (a
   * LIST by label with limit=1, from storage like every read here).
   */
  firstStamped(kind: WorkloadKind, namespace: string): Promise<JsonObject | undefined>;
  /** Status update (PUT of the status subresource) carrying the read resourceVersion; 409 on a race. */
  updateLeaseStatus(lease: JsonObject): Promise<void>;
}

export type ReadKind = 'list-leases' | 'get-lease' | 'get-workload' | 'list-stamped';

/**
 * One review's AdmissionIO: opens the real one, bound to the review's deadline signal, on the first call,
 * so that a review decided without the API server makes neither (nor the signal), and counts the reads.
 */
export class CountingIO implements AdmissionIO {
  /** Reads made through this object. */
  reads = 0;
  readonly #open: (signal: AbortSignal) => AdmissionIO;
  readonly #scope: { readonly signal: AbortSignal };
  readonly #onRead: (kind: ReadKind, seconds: number) => void;
  #io: AdmissionIO | undefined;

  /**
   * `scope.signal` is read when the first call opens the I/O; `onRead` hears of every read once it has
   * ended (answered, failed or aborted), with how long it took.
   */
  constructor(
    open: (signal: AbortSignal) => AdmissionIO,
    scope: { readonly signal: AbortSignal },
    onRead: (kind: ReadKind, seconds: number) => void,
  ) {
    this.#open = open;
    this.#scope = scope;
    this.#onRead = onRead;
  }

  async #read<T>(kind: ReadKind, call: (io: AdmissionIO) => Promise<T>): Promise<T> {
    this.reads++;
    const started = performance.now();
    try {
      return await call(this.#opened());
    } finally {
      this.#onRead(kind, (performance.now() - started) / 1000);
    }
  }

  #opened(): AdmissionIO {
    this.#io ??= this.#open(this.#scope.signal);
    return this.#io;
  }

  listLeases(namespace: string, limit?: number): Promise<LeaseList> {
    return this.#read('list-leases', (io) => io.listLeases(namespace, limit));
  }

  getLease(namespace: string, name: string): Promise<JsonObject | undefined> {
    return this.#read('get-lease', (io) => io.getLease(namespace, name));
  }

  getWorkload(kind: ReviewKind, namespace: string, name: string): Promise<JsonObject | undefined> {
    return this.#read('get-workload', (io) => io.getWorkload(kind, namespace, name));
  }

  firstStamped(kind: WorkloadKind, namespace: string): Promise<JsonObject | undefined> {
    return this.#read('list-stamped', (io) => io.firstStamped(kind, namespace));
  }

  updateLeaseStatus(lease: JsonObject): Promise<void> {
    return this.#opened().updateLeaseStatus(lease);
  }
}
