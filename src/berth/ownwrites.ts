// Drops the watch events caused by the reconciler's own writes: its status writes and the finalizer it
// adds. Every held heartbeat writes the status (lastHeartbeat), and without this each write would come
// back as an update event and trigger an immediate extra reconcile (one more central Acquire) per
// heartbeat. The reconcile that adds the finalizer goes on with the PATCH's answer, so that event decides
// nothing new either.
//
// An event of a write still in flight cannot be judged yet (the watch may deliver it before the write
// answers), so it is held back and, once the write ends, re-enqueued unless it was one of ours. The last
// few writes of a key are remembered, not just the latest: the finalizer's event may arrive after the
// status write that followed it. Events of anybody else's writes always pass.

export interface WriteObserver {
  /** A write of `key` (its status, or the finalizer) is about to be sent. */
  begin(key: string): void;
  /** It ended: the stored resourceVersion, or undefined when it failed. */
  end(key: string, resourceVersion: string | undefined): void;
}

/** Own writes remembered per key: a new lease's finalizer and the status writes that follow it. */
const REMEMBERED = 4;

/** Runs `write` of `key` announced to `writes`, which learns the resourceVersion it stored. */
export async function observedWrite<T extends { metadata: { resourceVersion?: string | undefined } }>(
  writes: WriteObserver | undefined,
  key: string,
  write: () => Promise<T>,
): Promise<T> {
  writes?.begin(key);
  let written: T | undefined;
  try {
    written = await write();
    return written;
  } finally {
    writes?.end(key, written?.metadata.resourceVersion);
  }
}

interface InFlight {
  writes: number;
  /** resourceVersions of update events seen meanwhile. */
  held: Set<string>;
}

export class OwnWrites implements WriteObserver {
  readonly #enqueue: (key: string) => void;
  /** resourceVersions of the last REMEMBERED own writes per key, oldest first. */
  readonly #written = new Map<string, string[]>();
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
    if (resourceVersion !== undefined) {
      const mine = this.#written.get(key) ?? [];
      mine.push(resourceVersion);
      if (mine.length > REMEMBERED) mine.shift();
      this.#written.set(key, mine);
    }
    const flight = this.#inFlight.get(key);
    if (flight === undefined) return;
    flight.writes--;
    if (resourceVersion !== undefined) flight.held.delete(resourceVersion);
    if (flight.writes > 0) return;
    this.#inFlight.delete(key);
    if ([...flight.held].some((rv) => !this.#mine(key, rv))) this.#enqueue(key);
  }

  /** Whether an update event of `key` at `resourceVersion` is to be dropped (or held back). */
  isOwn(key: string, resourceVersion: string | undefined): boolean {
    if (resourceVersion === undefined) return false;
    if (this.#mine(key, resourceVersion)) return true;
    const flight = this.#inFlight.get(key);
    if (flight === undefined) return false;
    flight.held.add(resourceVersion);
    return true;
  }

  #mine(key: string, resourceVersion: string): boolean {
    return this.#written.get(key)?.includes(resourceVersion) ?? false;
  }

  forget(key: string): void {
    this.#written.delete(key);
  }

  /** Keys remembered (bounded by the number of BerthLeases). */
  get size(): number {
    return this.#written.size;
  }
}
