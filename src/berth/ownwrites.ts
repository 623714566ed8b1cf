// Drops the watch events caused by the reconciler's own status writes. Every held heartbeat writes the
// status (lastHeartbeat), and without this each write would come back as an update event and trigger
// an immediate extra reconcile (one more central Acquire) per heartbeat.
//
// An event of a write still in flight cannot be judged yet (the watch may deliver it before the PUT
// answers), so it is held back and, once the write ends, re-enqueued unless it was that write's.
// Events of anybody else's writes always pass.

export interface WriteObserver {
  /** A status write of `key` is about to be sent. */
  begin(key: string): void;
  /** It ended: the stored resourceVersion, or undefined when it failed. */
  end(key: string, resourceVersion: string | undefined): void;
}

interface InFlight {
  writes: number;
  /** resourceVersions of update events seen meanwhile. */
  held: Set<string>;
}

export class OwnWrites implements WriteObserver {
  readonly #enqueue: (key: string) => void;
  readonly #written = new Map<string, string>();
  readonly #inFlight = new Map<string, InFlight>();

  constructor(enqueue: (key: string) => void) {
    this.#enqueue = enqueue;
  }

  begin(key: string): void {
    const flight = this.#inFlight.get(key) ?? { writes: 0, held: new Set<string>() };
    flight.writes++;
    this.#inFlight.set(key, flight);
  }

  end(key: string, resourceVersion: string | undefined): void {
    if (resourceVersion !== undefined) this.#written.set(key, resourceVersion);
    const flight = this.#inFlight.get(key);
    if (flight === undefined) return;
    flight.writes--;
    if (resourceVersion !== undefined) flight.held.delete(resourceVersion);
    if (flight.writes > 0) return;
    this.#inFlight.delete(key);
    const mine = this.#written.get(key);
    if ([...flight.held].some((rv) => rv !== mine)) this.#enqueue(key);
  }

  /** Whether an update event of `key` at `resourceVersion` is to be dropped (or held back). */
  isOwn(key: string, resourceVersion: string | undefined): boolean {
    if (resourceVersion === undefined) return false;
    if (this.#written.get(key) === resourceVersion) return true;
    const flight = this.#inFlight.get(key);
    if (flight === undefined) return false;
    flight.held.add(resourceVersion);
    return true;
  }

  forget(key: string): void {
    this.#written.delete(key);
  }

  /** Keys remembered (bounded by the number of BerthLeases). */
  get size(): number {
    return this.#written.size;
  }
}
