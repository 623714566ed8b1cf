// A domain's caches and controllers as the two Manager runnables every domain runs (docs/architecture.md,
// "Runnables and leader election"):
//   `<name>-cache` (`-caches` with more than one): non-leader, group "caches": the informers list and
//     watch on every replica, so a replica that wins the election starts its controllers on a synced
//     cache instead of listing then;
//   `<name>`: leader only: the controllers (they start the informers too, for use without the cache
//     runnable), stopped with drain; optionally a hand-over for when leading ends for good.
// The same object also runs standalone (`start`/`stop`, no Manager), as the tests and the hand-over
// after a lost successor do.
import type { Controller, Source } from './controller.ts';
import type { Runnable } from './manager.ts';

/** A cache a controller watches and the runnables start and stop: an Informer. */
export interface Cache<T = unknown> extends Source<T> {
  start(signal?: AbortSignal): void;
  stop(): Promise<void>;
}

export interface ControllerRunnablesOptions {
  /** The leader runnable's name; the cache runnable's is derived from it. */
  name: string;
  caches: readonly Cache[];
  controllers: readonly Controller[];
  /** After the controllers stopped: this replica no longer reconciles (e.g. drop in-memory state). */
  onStopped?: () => void;
  /** When leading ends for good, after the controllers stopped (Runnable.handOver). */
  handOver?: (grace?: AbortSignal) => Promise<void>;
}

export class ControllerRunnables {
  readonly name: string;
  readonly #caches: readonly Cache[];
  readonly #controllers: readonly Controller[];
  readonly #onStopped: (() => void) | undefined;
  readonly #handOver: ((grace?: AbortSignal) => Promise<void>) | undefined;
  /** Stops the caches for good: an informer is not restarted once stopped. */
  readonly #stopCaches = new AbortController();
  #started = false;

  constructor(options: ControllerRunnablesOptions) {
    if (options.name === '') throw new Error('controller runnables: a name is required');
    if (options.controllers.length === 0) throw new Error(`${options.name}: no controllers to run`);
    // Names are metric labels (controller=..., informer=...): two with one name would share series.
    const duplicate = (names: readonly string[]): string | undefined =>
      names.find((n, i) => names.indexOf(n) !== i);
    const controller = duplicate(options.controllers.map((c) => c.name));
    if (controller !== undefined) throw new Error(`${options.name}: duplicate controller name ${controller}`);
    const cache = duplicate(options.caches.map((c) => c.name));
    if (cache !== undefined) throw new Error(`${options.name}: duplicate cache name ${cache}`);
    this.name = options.name;
    this.#caches = options.caches;
    this.#controllers = options.controllers;
    this.#onStopped = options.onStopped;
    this.#handOver = options.handOver;
  }

  /** Starts listing and watching (idempotent). */
  startCaches(): void {
    for (const cache of this.#caches) cache.start(this.#stopCaches.signal);
  }

  /** Resolves once every cache holds its first list. */
  async waitForCaches(signal?: AbortSignal): Promise<void> {
    await Promise.all(this.#caches.map((c) => c.waitForSync(signal)));
  }

  async stopCaches(): Promise<void> {
    this.#stopCaches.abort();
    await Promise.all(this.#caches.map((c) => c.stop()));
  }

  /** Leader only: starts the caches if needed, then the controllers (each waits for its sources' sync). */
  async startControllers(signal?: AbortSignal): Promise<void> {
    this.startCaches();
    if (this.#started) throw new Error(`${this.name} already started`);
    this.#started = true;
    await Promise.all(this.#controllers.map((c) => c.start(signal)));
  }

  /** Finishes in-flight reconciles (unless `grace` aborts first). */
  async stopControllers(grace?: AbortSignal): Promise<void> {
    await Promise.all(this.#controllers.map((c) => c.stop(grace)));
    this.#onStopped?.();
  }

  /** Standalone: starts everything; aborting `signal` stops it. Resolves once the controllers run. */
  async start(signal?: AbortSignal): Promise<void> {
    this.startCaches();
    signal?.addEventListener('abort', () => void this.stop(), { once: true });
    await this.startControllers(signal);
  }

  /**
   * Standalone: stops the controllers, hands over (unless `grace` aborted: no time left), stops the
   * caches. Without a Manager there is no other replica to take over.
   */
  async stop(grace?: AbortSignal): Promise<void> {
    await this.stopControllers(grace);
    if (!grace?.aborted) await this.#runHandOver(grace);
    await this.stopCaches();
  }

  /** The cache runnable on every replica, the controllers' on the elected leader only. */
  runnables(): [Runnable, Runnable] {
    const handOver =
      this.#handOver === undefined ? {} : { handOver: (g: AbortSignal) => this.#runHandOver(g) };
    return [
      {
        name: `${this.name}-${this.#caches.length === 1 ? 'cache' : 'caches'}`,
        needLeaderElection: false,
        group: 'caches',
        start: async (signal) => {
          this.startCaches();
          await this.waitForCaches(signal);
        },
        stop: () => this.stopCaches(),
      },
      {
        name: this.name,
        needLeaderElection: true,
        start: (signal) => this.startControllers(signal),
        stop: (grace) => this.stopControllers(grace),
        // Only with a hand-over: the Manager waits for a successor only when some runnable has one.
        ...handOver,
      },
    ];
  }

  /** Nothing to hand over unless this replica ran the controllers. */
  async #runHandOver(grace?: AbortSignal): Promise<void> {
    if (this.#handOver === undefined || !this.#started) return;
    await this.#handOver(grace);
  }
}
