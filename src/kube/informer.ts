// An informer that cannot go silent: list, then watch from the list's resourceVersion; relist on 410
// Gone (HTTP or ERROR event) emitting deletes for objects that vanished meanwhile; restart after any
// error with jittered exponential backoff (1 s -> 30 s, reset by the next success); an inactivity
// timeout that replaces a stream on which nothing (not even a bookmark) arrived; indexers with O(1)
// lookups; handlers that can never throw into the informer.
//
// Not client-node's makeInformer/ListWatch: that one stops for good on any non-410 error, has no
// inactivity timeout, bookmarks, indexers or transform, and turns a throwing handler into an
// unhandled rejection (read in its dist/cache.js, 1.x and 2.x).
//
// Cached objects are shared with every reader and handler: treat them as read-only.
//
// The parts it is built from: the cache (store.ts), relist diffs (relist.ts), restart backoff
// (restart-backoff.ts), watch line splitting (lines.ts), object keys (keys.ts), metrics
// (informer-metrics.ts).
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { Logger } from '../observability/logger.ts';
import {
  describeError,
  isGone,
  KubeApiError,
  type ResourceRef,
  readJson,
  resourcePath,
  retryAfterSeconds,
} from './client.ts';
import { type Clock, realClock, type Timer } from './clock.ts';
import { type InformerMetrics, informerMetrics } from './informer-metrics.ts';
import { objectKey } from './keys.ts';
import { LineSplitter } from './lines.ts';
import { diffRelist } from './relist.ts';
import { type BackoffPolicy, DEFAULT_BACKOFF, restartDelay } from './restart-backoff.ts';
import { IndexedStore, type IndexFunc, NAMESPACE_INDEX } from './store.ts';
import type { KubeRequester } from './transport.ts';

/** The default transform: drop `metadata.managedFields` (large and never read by controllers). */
export function stripManagedFields<T extends KubernetesObject>(obj: T): T {
  if (obj.metadata?.managedFields !== undefined) delete obj.metadata.managedFields;
  return obj;
}

// ---- the informer ----

export interface EventHandlers<T> {
  onAdd?(obj: T): void | Promise<void>;
  /**
   * `relisted` when a relist found the change: versions between the two may have been skipped (a watch
   * shows every one).
   */
  onUpdate?(oldObj: T, newObj: T, relisted: boolean): void | Promise<void>;
  /** `finalStateUnknown` when the delete was inferred by a relist (obj is the last cached state). */
  onDelete?(obj: T, finalStateUnknown: boolean): void | Promise<void>;
}

export interface InformerOptions<T extends KubernetesObject> {
  /** Informer name: metric label and log field. */
  name: string;
  transport: KubeRequester;
  resource: ResourceRef;
  labelSelector?: string;
  fieldSelector?: string;
  /** List page size (`limit`); 0 lists in one request. Default 500. */
  pageSize?: number;
  /** Ask for watch bookmarks (kube-apiserver sends about one a minute). Default true. */
  allowWatchBookmarks?: boolean;
  /** Server-side watch timeout; default random in [300, 600) s like client-go. */
  watchTimeoutSeconds?: number;
  /**
   * A watch on which nothing arrived for this long is replaced (resuming from the last
   * resourceVersion). Default 5 min with bookmarks, else watch timeout + 60 s.
   */
  inactivityTimeoutMs?: number;
  /** Bound on each list page and on waiting for a watch's response headers. Default 60 s. */
  requestTimeoutMs?: number;
  backoff?: Partial<BackoffPolicy>;
  /** A watch that ends cleanly sooner than this without any event counts as a failure. Default 1 s. */
  minWatchDurationMs?: number;
  /** Applied to every object before caching; default strips managedFields; null keeps objects whole. */
  transform?: ((obj: T) => T) | null;
  clock?: Clock;
  /** Source of jitter, [0, 1). */
  random?: () => number;
  logger?: Logger;
  registry?: Registry;
}

interface WatchEvent {
  type: string;
  object: unknown;
}

class InactivityTimeout extends Error {
  constructor(ms: number) {
    super(`no data on the watch for ${ms}ms`);
    this.name = 'InactivityTimeout';
  }
}

class RequestTimeout extends Error {
  constructor(what: string, ms: number) {
    super(`${what} timed out after ${ms}ms`);
    this.name = 'RequestTimeout';
  }
}

class ShortWatch extends Error {
  constructor(ms: number) {
    super(`watch closed after ${ms}ms without any event`);
    this.name = 'ShortWatch';
  }
}

export type RestartReason = 'gone' | 'error' | 'inactivity' | 'closed';

interface ListResult<T> {
  apiVersion?: string;
  kind?: string;
  metadata?: { resourceVersion?: string; continue?: string };
  items?: T[];
}

export class Informer<T extends KubernetesObject> {
  readonly name: string;
  readonly #o: InformerOptions<T>;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #backoff: BackoffPolicy;
  readonly #transform: (obj: T) => T;
  readonly #store: IndexedStore<T>;
  readonly #handlers = new Set<EventHandlers<T>>();
  readonly #metrics: InformerMetrics | undefined;
  readonly #path: string;

  #lastResourceVersion = '';
  #synced = false;
  #syncWaiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  #stop: AbortController | undefined;
  #loop: Promise<void> | undefined;
  #failures = 0;
  #lastEventAt: number;

  constructor(options: InformerOptions<T>) {
    this.name = options.name;
    this.#o = options;
    this.#clock = options.clock ?? realClock;
    this.#random = options.random ?? Math.random;
    this.#backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
    this.#transform = options.transform === null ? (obj) => obj : (options.transform ?? stripManagedFields);
    this.#store = new IndexedStore<T>((index, err) =>
      options.logger?.error(
        { informer: this.name, index, err: describeError(err) },
        'indexer threw; object not indexed',
      ),
    );
    this.#path = resourcePath(options.resource);
    this.#lastEventAt = this.#clock.now();
    this.#metrics = options.registry === undefined ? undefined : informerMetrics(options.registry);
    this.#metrics?.handlerErrors.inc({ informer: this.name }, 0);
  }

  // ---- lifecycle ----

  /** Starts listing and watching (idempotent). Aborting `signal` stops the informer. */
  start(signal?: AbortSignal): void {
    if (this.#stop !== undefined) return;
    const stop = new AbortController();
    this.#stop = stop;
    this.#metrics?.live.add(this);
    this.#loop = this.#run(stop.signal).catch((err: unknown) => {
      // #run handles its own errors; this is a last line of defence against a bug.
      this.#o.logger?.error({ informer: this.name, err: describeError(err) }, 'informer loop crashed');
    });
    if (signal?.aborted) void this.stop();
    else signal?.addEventListener('abort', () => void this.stop(), { once: true });
  }

  /** Stops the informer and waits for its loop to end. The cache stays readable. */
  async stop(): Promise<void> {
    if (this.#stop === undefined) return;
    this.#stop.abort();
    await this.#loop;
    if (this.#metrics?.live.delete(this)) this.#metrics.lastEvent.remove({ informer: this.name });
    for (const waiter of this.#syncWaiters.splice(0))
      waiter.reject(new Error(`informer ${this.name} stopped`));
  }

  isRunning(): boolean {
    return this.#stop !== undefined && !this.#stop.signal.aborted;
  }

  hasSynced(): boolean {
    return this.#synced;
  }

  /** Resolves once the first list is in the cache; rejects if `signal` aborts or the informer stops. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#stop?.signal.aborted) return Promise.reject(new Error(`informer ${this.name} stopped`));
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.#syncWaiters = this.#syncWaiters.filter((w) => w !== waiter);
        reject(signal?.reason);
      };
      const waiter = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject: (err: unknown) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      this.#syncWaiters.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Last resourceVersion seen (list, event or bookmark). */
  lastResourceVersion(): string {
    return this.#lastResourceVersion;
  }

  /** Seconds since anything (list, event, bookmark) was last received. */
  secondsSinceLastEvent(): number {
    return Math.max(0, (this.#clock.now() - this.#lastEventAt) / 1000);
  }

  // ---- cache reads ----

  get(key: string): T | undefined {
    return this.#store.get(key);
  }

  getByName(name: string, namespace?: string): T | undefined {
    return this.#store.get(namespace ? `${namespace}/${name}` : name);
  }

  /** All cached objects, or those of one namespace. */
  list(namespace?: string): T[] {
    return namespace === undefined ? this.#store.values() : this.#store.byIndex(NAMESPACE_INDEX, namespace);
  }

  keys(): string[] {
    return this.#store.keys();
  }

  get size(): number {
    return this.#store.size;
  }

  /** Adds an index (e.g. Pods by `spec.nodeName`); may be called before or after start. */
  addIndexer(name: string, fn: IndexFunc<T>): void {
    this.#store.addIndexer(name, fn);
  }

  byIndex(name: string, value: string): T[] {
    return this.#store.byIndex(name, value);
  }

  indexKeys(name: string, value: string): string[] {
    return this.#store.indexKeys(name, value);
  }

  // ---- handlers ----

  /**
   * Registers handlers. Objects already cached are delivered to them at once as adds (like client-go),
   * so a controller started after the cache synced still sees everything. Returns an unregister function.
   */
  addEventHandler(handlers: EventHandlers<T>): () => void {
    this.#handlers.add(handlers);
    for (const obj of this.#store.values()) this.#call(handlers, 'onAdd', [obj]);
    return () => {
      this.#handlers.delete(handlers);
    };
  }

  #emit(kind: 'onAdd', args: [T]): void;
  #emit(kind: 'onUpdate', args: [T, T, boolean]): void;
  #emit(kind: 'onDelete', args: [T, boolean]): void;
  #emit(kind: keyof EventHandlers<T>, args: [T] | [T, T, boolean] | [T, boolean]): void {
    for (const handlers of [...this.#handlers]) this.#call(handlers, kind, args);
  }

  // Handlers run in try/catch, and a returned promise gets a rejection handler: neither a throw nor an
  // async failure can reach the informer or become an unhandled rejection.
  #call(handlers: EventHandlers<T>, kind: keyof EventHandlers<T>, args: unknown[]): void {
    const fn = handlers[kind] as ((...a: unknown[]) => unknown) | undefined;
    if (fn === undefined) return;
    try {
      const result = fn.apply(handlers, args);
      if (isThenable(result)) result.then(undefined, (err: unknown) => this.#handlerFailed(kind, err));
    } catch (err) {
      this.#handlerFailed(kind, err);
    }
  }

  #handlerFailed(kind: string, err: unknown): void {
    this.#metrics?.handlerErrors.inc({ informer: this.name });
    this.#o.logger?.error(
      { informer: this.name, handler: kind, err: describeError(err) },
      'informer handler threw',
    );
  }

  // ---- list + watch loop ----

  async #run(stop: AbortSignal): Promise<void> {
    let relist = true;
    while (!stop.aborted) {
      try {
        if (relist) {
          await this.#list(stop);
          relist = false;
        }
        const ended = await this.#watch(stop);
        if (stop.aborted) break;
        if (!ended.healthy) throw new ShortWatch(ended.durationMs);
        this.#succeeded();
        this.#countRestart('closed');
        // A healthy watch ended by the server's timeout: resume at once from the last resourceVersion.
        this.#o.logger?.debug(
          { informer: this.name, rv: this.#lastResourceVersion },
          'watch ended; resuming',
        );
      } catch (err) {
        if (stop.aborted) break;
        const gone = isGone(err);
        if (gone) {
          relist = true;
          this.#lastResourceVersion = '';
        }
        this.#failures++;
        this.#countRestart(gone ? 'gone' : err instanceof InactivityTimeout ? 'inactivity' : 'error');
        // A 410 after a working watch relists at once; anything else (and repeated 410s) backs off.
        const retryAfter = retryAfterSeconds(err);
        const delay =
          gone && this.#failures === 1
            ? 0
            : restartDelay(
                this.#failures,
                this.#backoff,
                this.#random(),
                retryAfter === undefined ? undefined : retryAfter * 1000,
              );
        const level = gone || err instanceof InactivityTimeout ? 'info' : 'warn';
        this.#o.logger?.[level](
          { informer: this.name, err: describeError(err), failures: this.#failures, delayMs: delay, relist },
          gone ? 'resourceVersion expired; relisting' : 'list/watch failed; restarting',
        );
        if (delay > 0) await this.#clock.sleep(delay, stop).catch(() => {});
      }
    }
  }

  /**
   * Data arrived on a watch (or a watch ran its course): the backoff starts over. A completed list
   * alone does not reset it, so a server that answers every watch with 410 cannot make us relist in a
   * hot loop.
   */
  #succeeded(): void {
    this.#failures = 0;
  }

  #countRestart(reason: RestartReason): void {
    this.#metrics?.restarts.inc({ informer: this.name, reason });
  }

  #noteActivity(): void {
    this.#lastEventAt = this.#clock.now();
  }

  #selectors(): Record<string, string | undefined> {
    return { labelSelector: this.#o.labelSelector, fieldSelector: this.#o.fieldSelector };
  }

  /** Runs `fn` with a signal that aborts when `stop` does or after `ms` (with a RequestTimeout reason). */
  async #withTimeout<R>(
    stop: AbortSignal,
    ms: number,
    what: string,
    fn: (signal: AbortSignal, timer: { reset(ms: number): void; cancel(): void }) => Promise<R>,
  ): Promise<R> {
    const local = new AbortController();
    let timer: Timer | undefined;
    const arm = (delay: number, reason: () => Error): void => {
      this.#clock.clearTimeout(timer);
      timer = this.#clock.setTimeout(() => local.abort(reason()), delay);
    };
    // A listener added to an already aborted signal never runs: a stop() that came while the previous
    // step finished (e.g. from a handler during the list) would leave this request running unaborted
    // and stop() waiting for it until the server ends it.
    if (stop.aborted) throw stop.reason ?? new Error(`informer ${this.name} stopped`);
    arm(ms, () => new RequestTimeout(what, ms));
    const onStop = (): void => local.abort(stop.reason);
    stop.addEventListener('abort', onStop, { once: true });
    try {
      return await fn(local.signal, {
        reset: (delay) => arm(delay, () => new InactivityTimeout(delay)),
        cancel: () => this.#clock.clearTimeout(timer),
      });
    } catch (err) {
      // Whatever the fetch layer threw on abort, report why we aborted.
      if (local.signal.aborted && !stop.aborted && local.signal.reason instanceof Error)
        throw local.signal.reason;
      throw err;
    } finally {
      this.#clock.clearTimeout(timer);
      stop.removeEventListener('abort', onStop);
    }
  }

  async #list(stop: AbortSignal): Promise<void> {
    const pageSize = this.#o.pageSize ?? 500;
    const timeoutMs = this.#o.requestTimeoutMs ?? 60_000;
    const listed = new Map<string, T>();
    let cont: string | undefined;
    let rv = '';
    do {
      const page = await this.#withTimeout(stop, timeoutMs, 'list', async (signal) => {
        const res = await this.#o.transport.request({
          path: this.#path,
          query: { ...this.#selectors(), limit: pageSize > 0 ? pageSize : undefined, continue: cont },
          signal,
        });
        return readJson<ListResult<T>>(res);
      });
      const itemKind = page.kind?.replace(/List$/, '');
      for (const raw of page.items ?? []) {
        // List items carry no apiVersion/kind; fill them in so cached objects look like watched ones.
        if (raw.kind === undefined && itemKind) raw.kind = itemKind;
        if (raw.apiVersion === undefined && page.apiVersion) raw.apiVersion = page.apiVersion;
        const obj = this.#transform(raw);
        listed.set(objectKey(obj), obj);
      }
      rv = page.metadata?.resourceVersion ?? '';
      cont = page.metadata?.continue || undefined;
    } while (cont !== undefined);
    this.#replace(listed, rv);
  }

  #replace(listed: Map<string, T>, rv: string): void {
    const diff = diffRelist(this.#store, listed);
    this.#store.replace(listed);
    this.#lastResourceVersion = rv;
    this.#noteActivity();
    const first = !this.#synced;
    this.#synced = true;
    if (first) for (const waiter of this.#syncWaiters.splice(0)) waiter.resolve();
    this.#o.logger?.debug(
      {
        informer: this.name,
        rv,
        objects: listed.size,
        added: diff.added.length,
        updated: diff.updated.length,
        deleted: diff.deleted.length,
      },
      first ? 'informer synced' : 'relisted',
    );
    for (const obj of diff.deleted) this.#emit('onDelete', [obj, true]);
    for (const [old, obj] of diff.updated) this.#emit('onUpdate', [old, obj, true]);
    for (const obj of diff.added) this.#emit('onAdd', [obj]);
  }

  /** One watch connection; resolves when it ends cleanly, throws on errors and ERROR events. */
  async #watch(stop: AbortSignal): Promise<{ healthy: boolean; durationMs: number }> {
    const bookmarks = this.#o.allowWatchBookmarks ?? true;
    const timeoutSeconds = this.#o.watchTimeoutSeconds ?? Math.floor(300 * (1 + this.#random()));
    const inactivityMs = this.#o.inactivityTimeoutMs ?? (bookmarks ? 300_000 : (timeoutSeconds + 60) * 1000);
    const started = this.#clock.now();
    let events = 0;
    await this.#withTimeout(stop, this.#o.requestTimeoutMs ?? 60_000, 'watch', async (signal, timer) => {
      const res = await this.#o.transport.request({
        path: this.#path,
        query: {
          ...this.#selectors(),
          watch: true,
          resourceVersion: this.#lastResourceVersion,
          allowWatchBookmarks: bookmarks ? true : undefined,
          timeoutSeconds,
        },
        signal,
      });
      if (res.status !== 200) await readJson(res);
      const body = res.stream();
      if (body === null) throw new Error('watch response has no body');
      timer.reset(inactivityMs);
      const reader = body.pipeThrough(new TextDecoderStream()).getReader();
      const lines = new LineSplitter();
      try {
        for (;;) {
          const chunk = await reader.read();
          if (chunk.done) break;
          timer.reset(inactivityMs);
          for (const line of lines.push(chunk.value)) {
            this.#handleWatchLine(line);
            events++;
          }
        }
        for (const line of lines.end()) {
          this.#handleWatchLine(line);
          events++;
        }
      } finally {
        timer.cancel();
        reader.cancel().catch(() => {});
      }
    });
    const durationMs = this.#clock.now() - started;
    return { healthy: events > 0 || durationMs >= (this.#o.minWatchDurationMs ?? 1000), durationMs };
  }

  #handleWatchLine(line: string): void {
    let event: WatchEvent;
    try {
      event = JSON.parse(line) as WatchEvent;
    } catch {
      throw new Error(`malformed watch event (${line.length} bytes)`);
    }
    this.#noteActivity();
    const object = event.object as T | undefined;
    switch (event.type) {
      case 'ADDED':
      case 'MODIFIED': {
        if (object === undefined) throw new Error(`watch ${event.type} event without an object`);
        const obj = this.#transform(object);
        const key = objectKey(obj);
        const old = this.#store.set(key, obj);
        this.#advance(obj);
        if (old === undefined) this.#emit('onAdd', [obj]);
        else this.#emit('onUpdate', [old, obj, false]);
        return;
      }
      case 'DELETED': {
        if (object === undefined) throw new Error('watch DELETED event without an object');
        const obj = this.#transform(object);
        this.#store.delete(objectKey(obj));
        this.#advance(obj);
        this.#emit('onDelete', [obj, false]);
        return;
      }
      case 'BOOKMARK':
        this.#advance(object);
        return;
      case 'ERROR': {
        const status = (object ?? {}) as { code?: number; reason?: string; message?: string };
        throw new KubeApiError(status.code ?? 500, status);
      }
      default:
        throw new Error(`unknown watch event type "${String(event.type)}"`);
    }
  }

  #advance(obj: KubernetesObject | undefined): void {
    const rv = obj?.metadata?.resourceVersion;
    if (rv) this.#lastResourceVersion = rv;
    this.#succeeded();
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
