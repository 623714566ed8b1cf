// Per-key mutual exclusion inside one process: the BerthLease reconcile of a lease and the managed
// path's other work on the same lease (Pod registration by the permit controller, the shutdown hand-over)
// take turns, so they do not race each other's resourceVersion-guarded status writes. Different keys run
// concurrently. Waiters are served in arrival order; a waiter whose signal aborts leaves the line.

export class KeyedLock {
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `fn` once every earlier holder of `key` finished. */
  async run<T>(key: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    // Successors wait for the previous holder and for us, even if we give up waiting.
    const tail = previous.then(() => mine);
    this.#tails.set(key, tail);
    try {
      await waitFor(previous, signal);
      return await fn();
    } finally {
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }

  /** Keys currently held or waited for. */
  get size(): number {
    return this.#tails.size;
  }
}

function waitFor(promise: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
