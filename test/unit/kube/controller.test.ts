import type { KubernetesObject } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import {
  Controller,
  type ControllerOptions,
  classifyReconcile,
  isTerminalError,
  ReconcileTimeoutError,
  type Source,
  TerminalError,
} from '../../../src/kube/controller.ts';
import type { EventHandlers } from '../../../src/kube/informer.ts';
import { ItemExponentialFailureRateLimiter } from '../../../src/kube/ratelimit.ts';

const flush = async (n = 10): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** A source whose events the test fires by hand. */
class FakeSource<T extends KubernetesObject> implements Source<T> {
  readonly name = 'fake';
  readonly handlers = new Set<EventHandlers<T>>();
  synced = true;
  #waiters: Array<() => void> = [];

  addEventHandler(h: EventHandlers<T>): () => void {
    this.handlers.add(h);
    return () => this.handlers.delete(h);
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.#waiters.push(resolve);
      signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  }

  sync(): void {
    this.synced = true;
    for (const w of this.#waiters.splice(0)) w();
  }

  add(obj: T): void {
    for (const h of this.handlers) void h.onAdd?.(obj);
  }

  update(old: T, obj: T): void {
    for (const h of this.handlers) void h.onUpdate?.(old, obj, false);
  }

  remove(obj: T): void {
    for (const h of this.handlers) void h.onDelete?.(obj, false);
  }
}

const ref = (name: string, namespace = 'ns', labels: Record<string, string> = {}): KubernetesObject => ({
  metadata: { name, namespace, labels },
});

const controllers: Controller[] = [];
afterEach(async () => {
  await Promise.all(controllers.splice(0).map((c) => c.stop()));
});

function make(options: Partial<ControllerOptions> & Pick<ControllerOptions, 'reconcile'>) {
  const clock = new ManualClock();
  const registry = new Registry();
  const c = new Controller({
    name: 'test',
    clock,
    registry,
    rateLimiter: new ItemExponentialFailureRateLimiter<string>(100, 10_000),
    ...options,
  });
  controllers.push(c);
  return { c, clock, registry };
}

async function metric(registry: Registry, name: string): Promise<string> {
  return registry.getSingleMetricAsString(name);
}

describe('classifyReconcile', () => {
  it('maps results and errors like controller-runtime', () => {
    expect(classifyReconcile(undefined)).toEqual({ result: 'success' });
    expect(classifyReconcile({})).toEqual({ result: 'success' });
    expect(classifyReconcile({ requeueAfter: 0 })).toEqual({ result: 'success' });
    expect(classifyReconcile({ requeueAfter: 500 })).toEqual({ result: 'requeue_after', afterMs: 500 });
    expect(classifyReconcile({ requeue: true })).toEqual({ result: 'requeue' });
    const err = new Error('x');
    expect(classifyReconcile({ requeueAfter: 5 }, err)).toEqual({
      result: 'error',
      terminal: false,
      error: err,
    });
    expect(classifyReconcile(undefined, new TerminalError('bad'))).toMatchObject({
      result: 'error',
      terminal: true,
    });
  });

  it('finds a TerminalError in the cause chain', () => {
    expect(isTerminalError(new Error('wrapped', { cause: new TerminalError('root') }))).toBe(true);
    expect(isTerminalError(new Error('plain'))).toBe(false);
    expect(isTerminalError('string')).toBe(false);
  });
});

describe('Controller', () => {
  it('maps source events to keys (old and new on update) and reconciles each key once per change', async () => {
    const seen: string[] = [];
    const { c } = make({
      reconcile: async (key) => {
        seen.push(key);
      },
    });
    const pods = new FakeSource<KubernetesObject>();
    const owners = new FakeSource<KubernetesObject>();
    c.watches(pods).watches(owners, { map: (o) => `ns/owner-of-${o.metadata?.labels?.app ?? 'none'}` });
    await c.start();
    pods.add(ref('a'));
    await flush();
    owners.update(ref('x', 'ns', { app: 'one' }), ref('x', 'ns', { app: 'two' }));
    await flush();
    pods.remove(ref('a'));
    await flush();
    expect(seen).toEqual(['ns/a', 'ns/owner-of-one', 'ns/owner-of-two', 'ns/a']);
  });

  it('applies predicates', async () => {
    const seen: string[] = [];
    const { c } = make({
      reconcile: async (key) => {
        seen.push(key);
      },
    });
    const src = new FakeSource<KubernetesObject>();
    c.watches(src, {
      predicate: (obj, old) => old === undefined || obj.metadata?.labels?.x !== old.metadata?.labels?.x,
    });
    await c.start();
    src.update(ref('a', 'ns', { x: '1' }), ref('a', 'ns', { x: '1' }));
    src.update(ref('b', 'ns', { x: '1' }), ref('b', 'ns', { x: '2' }));
    await flush();
    expect(seen).toEqual(['ns/b']);
  });

  it('requeues a throwing reconcile with growing delays and resets the backoff after success', async () => {
    const attempts: number[] = [];
    let failUntil = 4;
    const { c, clock, registry } = make({
      reconcile: async () => {
        attempts.push(clock.now());
        if (attempts.length <= failUntil) throw new Error('transient');
      },
    });
    await c.start();
    c.enqueue('ns/a');
    await flush();
    for (let i = 0; i < 5; i++) {
      await clock.advanceAsync(clock.nextDueAt()! - clock.now());
      await flush();
    }
    const gaps = attempts.slice(1).map((t, i) => t - (attempts[i] as number));
    expect(gaps).toEqual([100, 200, 400, 800]);
    expect(c.queue.numRequeues('ns/a')).toBe(0);

    failUntil = 6;
    c.enqueue('ns/a');
    await flush();
    await clock.advanceAsync(100);
    await flush();
    expect(attempts.length).toBe(7); // 5 + the failing one + the retry after the reset 100 ms
    const text = await metric(registry, 'controller_runtime_reconcile_total');
    expect(text).toContain('controller_runtime_reconcile_total{controller="test",result="error"} 5');
    expect(text).toContain('controller_runtime_reconcile_total{controller="test",result="success"} 2');
    expect(await metric(registry, 'controller_runtime_reconcile_errors_total')).toContain(
      'controller_runtime_reconcile_errors_total{controller="test"} 5',
    );
  });

  it('does not retry a TerminalError', async () => {
    let calls = 0;
    const { c, clock, registry } = make({
      reconcile: async () => {
        calls++;
        throw new TerminalError('spec is invalid');
      },
    });
    await c.start();
    c.enqueue('ns/a');
    await flush();
    await clock.advanceAsync(60_000);
    await flush();
    expect(calls).toBe(1);
    expect(clock.pending()).toBe(0);
    expect(await metric(registry, 'controller_runtime_terminal_reconcile_errors_total')).toContain(
      'controller_runtime_terminal_reconcile_errors_total{controller="test"} 1',
    );
  });

  it('honours requeueAfter (and forgets the error backoff)', async () => {
    const at: number[] = [];
    const { c, clock, registry } = make({
      reconcile: async () => {
        at.push(clock.now());
        return at.length < 3 ? { requeueAfter: 5000 } : undefined;
      },
    });
    await c.start();
    c.enqueue('ns/a');
    await flush();
    await clock.advanceAsync(4999);
    await flush();
    expect(at).toHaveLength(1);
    await clock.advanceAsync(1);
    await flush();
    await clock.advanceAsync(5000);
    await flush();
    expect(at.map((t) => t - (at[0] as number))).toEqual([0, 5000, 10_000]);
    expect(await metric(registry, 'controller_runtime_reconcile_total')).toContain(
      'controller_runtime_reconcile_total{controller="test",result="requeue_after"} 2',
    );
  });

  it('requeue: true uses the rate limiter', async () => {
    const at: number[] = [];
    const { c, clock } = make({
      reconcile: async () => {
        at.push(clock.now());
        return at.length < 3 ? { requeue: true } : undefined;
      },
    });
    await c.start();
    c.enqueue('k');
    await flush();
    await clock.advanceAsync(100);
    await flush();
    await clock.advanceAsync(200);
    await flush();
    expect(at.map((t) => t - (at[0] as number))).toEqual([0, 100, 300]);
  });

  it('aborts the signal after the per-reconcile timeout and counts it', async () => {
    let sawAbort: unknown;
    const { c, clock, registry } = make({
      reconcileTimeoutMs: 1000,
      reconcile: (_key, { signal }) =>
        new Promise((_, reject) => {
          signal.addEventListener('abort', () => {
            sawAbort = signal.reason;
            reject(signal.reason);
          });
        }),
    });
    await c.start();
    c.enqueue('ns/slow');
    await flush();
    await clock.advanceAsync(1000);
    await flush();
    expect(sawAbort).toBeInstanceOf(ReconcileTimeoutError);
    expect(await metric(registry, 'controller_runtime_reconcile_timeouts_total')).toContain(
      'controller_runtime_reconcile_timeouts_total{controller="test"} 1',
    );
    expect(c.queue.numRequeues('ns/slow')).toBe(1);
  });

  it('survives reconcilers that throw synchronously or throw non-Errors', async () => {
    let calls = 0;
    const { c } = make({
      reconcile: ((key: string) => {
        calls++;
        if (key === 'sync') throw new Error('sync throw');
        return Promise.reject(undefined);
      }) as ControllerOptions['reconcile'],
    });
    await c.start();
    c.enqueue('sync');
    c.enqueue('nullish');
    await flush();
    expect(calls).toBe(2);
    expect(c.queue.numRequeues('sync')).toBe(1);
    expect(c.queue.numRequeues('nullish')).toBe(1);
  });

  it('runs at most maxConcurrentReconciles at once and reports active workers', async () => {
    const release: Array<() => void> = [];
    let active = 0;
    let peak = 0;
    const { c, registry } = make({
      maxConcurrentReconciles: 3,
      reconcile: () =>
        new Promise<void>((resolve) => {
          active++;
          peak = Math.max(peak, active);
          release.push(() => {
            active--;
            resolve();
          });
        }),
    });
    await c.start();
    for (let i = 0; i < 10; i++) c.enqueue(`k${i}`);
    await flush();
    expect(active).toBe(3);
    expect(await metric(registry, 'controller_runtime_active_workers')).toContain(
      'controller_runtime_active_workers{controller="test"} 3',
    );
    expect(await metric(registry, 'controller_runtime_max_concurrent_reconciles')).toContain(
      'controller_runtime_max_concurrent_reconciles{controller="test"} 3',
    );
    while (release.length > 0) {
      for (const r of release.splice(0)) r();
      await flush();
    }
    expect(peak).toBe(3);
    expect(active).toBe(0);
  });

  it('stop() drains: in-flight reconciles finish, queued keys are not started, sources are detached', async () => {
    const started: string[] = [];
    let finish!: () => void;
    const src = new FakeSource<KubernetesObject>();
    const { c } = make({
      reconcile: (key) => {
        started.push(key);
        return new Promise<void>((resolve) => {
          finish = resolve;
        });
      },
    });
    c.watches(src);
    await c.start();
    src.add(ref('a'));
    src.add(ref('b'));
    await flush();
    expect(started).toEqual(['ns/a']);
    let stopped = false;
    const stopping = c.stop().then(() => {
      stopped = true;
    });
    await flush();
    expect(stopped).toBe(false);
    finish();
    await stopping;
    expect(started).toEqual(['ns/a']);
    expect(src.handlers.size).toBe(0);
  });

  it('stop(grace) aborts in-flight reconciles once the grace signal fires', async () => {
    let aborted = false;
    const { c } = make({
      reconcile: (_key, { signal }) =>
        new Promise<void>((_, reject) => {
          signal.addEventListener('abort', () => {
            aborted = true;
            reject(signal.reason);
          });
        }),
    });
    await c.start();
    c.enqueue('stuck');
    await flush();
    const grace = new AbortController();
    const stopping = c.stop(grace.signal);
    await flush();
    expect(aborted).toBe(false);
    grace.abort();
    await stopping;
    expect(aborted).toBe(true);
  });

  it('stop() ends when the in-flight key was changed again meanwhile', async () => {
    // The reconcile writes its object; the watch event re-adds the key before the reconcile returns.
    let finish!: () => void;
    const src = new FakeSource<KubernetesObject>();
    const { c } = make({
      reconcile: () =>
        new Promise<void>((resolve) => {
          finish = resolve;
        }),
    });
    c.watches(src);
    await c.start();
    src.add(ref('a'));
    await flush();
    src.update(ref('a'), ref('a'));
    let stopped = false;
    const stopping = c.stop().then(() => {
      stopped = true;
    });
    await flush();
    expect(stopped).toBe(false);
    finish();
    await flush();
    expect(stopped).toBe(true);
    await stopping;
  });

  it('stop() is bounded: after stopTimeoutMs in-flight reconciles are aborted and stop() returns', async () => {
    let abortedWith: unknown;
    const { c, clock } = make({
      stopTimeoutMs: 5000,
      // Notes the abort, but never finishes on its own.
      reconcile: (_key, { signal }) =>
        new Promise<void>(() => {
          signal.addEventListener('abort', () => {
            abortedWith = signal.reason;
          });
        }),
    });
    await c.start();
    c.enqueue('stuck');
    await flush();
    let stopped = false;
    const stopping = c.stop().then(() => {
      stopped = true;
    });
    await clock.advanceAsync(4999);
    expect(stopped).toBe(false);
    expect(abortedWith).toBeUndefined();
    await clock.advanceAsync(1);
    await flush();
    expect(stopped).toBe(true);
    await stopping;
    expect(String(abortedWith)).toMatch(/did not finish within 5000ms/);
    expect(clock.pending()).toBe(0);
  });

  it('a grace signal given to a later stop() call applies to the stop already under way', async () => {
    let aborted = false;
    const { c } = make({
      stopTimeoutMs: 0,
      reconcile: (_key, { signal }) =>
        new Promise<void>(() => {
          signal.addEventListener('abort', () => {
            aborted = true;
          });
        }),
    });
    const startSignal = new AbortController();
    await c.start(startSignal.signal);
    c.enqueue('stuck');
    await flush();
    startSignal.abort(); // the runnable's signal: stop() without grace
    const grace = new AbortController();
    const stopping = c.stop(grace.signal);
    await flush();
    expect(aborted).toBe(false);
    let stopped = false;
    void stopping.then(() => {
      stopped = true;
    });
    grace.abort();
    await flush();
    expect(stopped).toBe(true);
    expect(aborted).toBe(true);
  });

  it('start() waits for the sources to sync before running workers, bounded by the sync timeout', async () => {
    const src = new FakeSource<KubernetesObject>();
    src.synced = false;
    const seen: string[] = [];
    const { c } = make({
      reconcile: async (key) => {
        seen.push(key);
      },
    });
    c.watches(src);
    const starting = c.start();
    src.add(ref('early'));
    await flush();
    expect(seen).toEqual([]);
    src.sync();
    await starting;
    await flush();
    expect(seen).toEqual(['ns/early']);

    const stuck = new FakeSource<KubernetesObject>();
    stuck.synced = false;
    const other = make({ reconcile: async () => {}, cacheSyncTimeoutMs: 1000 });
    other.c.watches(stuck);
    const failing = expect(other.c.start()).rejects.toThrow(/did not sync within 1000ms/);
    await flush();
    await other.clock.advanceAsync(1000);
    await failing;
  });

  it('passes a child logger context and parsed key to the reconciler', async () => {
    let got: { namespace: string | undefined; name: string; id: string } | undefined;
    const { c } = make({
      reconcile: async (_key, ctx) => {
        got = { namespace: ctx.namespace, name: ctx.name, id: ctx.reconcileID };
        ctx.log.info('hello');
      },
    });
    await c.start();
    c.enqueue('ns/x');
    await flush();
    expect(got?.namespace).toBe('ns');
    expect(got?.name).toBe('x');
    expect(got?.id).toMatch(/^[0-9a-f-]{36}$/);
  });
});
