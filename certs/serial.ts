// Runs an async job one at a time, coalescing requests: while a run is in progress, any number of requests
// make exactly one more run after it. Every caller's promise resolves after a run that started after the
// call, so `await refresh()` always observes the state at least as new as the call.
export class SerialRunner {
  readonly #job: () => Promise<void>;
  #tail: Promise<void> = Promise.resolve();
  #queued: Promise<void> | undefined;

  /** `job` must not throw; a rejection is swallowed here so the chain continues. */
  constructor(job: () => Promise<void>) {
    this.#job = job;
  }

  run(): Promise<void> {
    if (this.#queued !== undefined) return this.#queued;
    const next = this.#tail.then(() => {
      this.#queued = undefined;
      return this.#job();
    });
    const settled = next.catch(() => undefined);
    this.#queued = settled;
    this.#tail = settled;
    return settled;
  }

  /** Resolves once everything requested so far has run. */
  idle(): Promise<void> {
    return this.#tail;
  }
}
