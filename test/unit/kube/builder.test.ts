// The controller builder and the runnables it (and ControllerRunnables for several controllers) hands the
// Manager: what is registered where, how events reach the queue, the lifecycle, and refused builds.
import type { KubernetesObject } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { ControllerBuilder } from '../../../src/kube/builder.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { Controller } from '../../../src/kube/controller.ts';
import { type Cache, ControllerRunnables } from '../../../src/kube/controller-runnables.ts';
import type { EventHandlers } from '../../../src/kube/informer.ts';
import type { RunnableContext } from '../../../src/kube/manager.ts';
import type { RateLimiter } from '../../../src/kube/ratelimit.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { eventually } from '../../helpers/eventually.ts';

/** An informer stand-in: the test fires its events and decides when it has synced. */
class FakeCache implements Cache<KubernetesObject> {
  readonly name: string;
  readonly handlers = new Set<EventHandlers<KubernetesObject>>();
  startedWith: AbortSignal | undefined;
  starts = 0;
  stopped = false;
  #synced = false;
  #waiters: Array<() => void> = [];

  constructor(name: string) {
    this.name = name;
  }

  start(signal?: AbortSignal): void {
    this.starts++;
    this.startedWith ??= signal;
  }

  async stop(): Promise<void> {
    this.stopped = true;
  }

  addEventHandler(handlers: EventHandlers<KubernetesObject>): () => void {
    this.handlers.add(handlers);
    return () => this.handlers.delete(handlers);
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.#waiters.push(resolve);
      signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  }

  sync(): this {
    this.#synced = true;
    for (const w of this.#waiters.splice(0)) w();
    return this;
  }

  add(obj: KubernetesObject): void {
    for (const h of this.handlers) void h.onAdd?.(obj);
  }

  update(old: KubernetesObject, obj: KubernetesObject): void {
    for (const h of this.handlers) void h.onUpdate?.(old, obj, false);
  }
}

const obj = (name: string, labels: Record<string, string> = {}, namespace = 'ns'): KubernetesObject => ({
  metadata: { name, namespace, labels },
});

const ctx: RunnableContext = { logger: createLogger({ level: 'silent' }), fail: () => {} };

/** A reconciler that records its keys and how often it was reset. */
function recorder() {
  const keys: string[] = [];
  let resets = 0;
  return {
    keys,
    resets: () => resets,
    reconciler: {
      reconcile: async (key: string) => {
        keys.push(key);
      },
      reset: () => {
        resets++;
      },
    },
  };
}

const running: ControllerRunnables[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop()));
});

function build(configure: (b: ControllerBuilder) => ControllerBuilder, name = 'things') {
  const rec = recorder();
  const built = configure(new ControllerBuilder(name).withOptions({ clock: new ManualClock() })).complete(
    rec.reconciler,
  );
  running.push(built);
  return { built, ...rec };
}

describe('ControllerBuilder: what it registers', () => {
  it('a cache runnable in group "caches" on every replica and the controller on the leader, by name', () => {
    const one = build((b) => b.for(new FakeCache('things'))).built.runnables();
    expect(one.map((r) => [r.name, r.needLeaderElection, r.group])).toEqual([
      ['things-cache', false, 'caches'],
      ['things', true, undefined],
    ]);
    const two = build(
      (b) => b.for(new FakeCache('a')).watches(new FakeCache('b'), { map: () => [] }),
      'pair',
    ).built.runnables();
    expect(two.map((r) => r.name)).toEqual(['pair-caches', 'pair']);
    // No hand-over unless asked for: the Manager waits for a successor only for runnables that have one.
    expect(one[1]).not.toHaveProperty('handOver');
    expect(two[1]).not.toHaveProperty('handOver');
  });

  it('passes its options to the Controller (name as the metrics label, workers, rate limiter)', async () => {
    const registry = new Registry();
    const delays: string[] = [];
    const limiter: RateLimiter<string> = {
      when: (item) => {
        delays.push(item);
        return 0;
      },
      forget: () => {},
      numRequeues: () => 0,
    };
    const cache = new FakeCache('things').sync();
    let failed = false;
    const built = new ControllerBuilder('things')
      .for(cache)
      .withOptions({ maxConcurrentReconciles: 3, rateLimiter: limiter, registry, clock: new ManualClock() })
      .complete({
        reconcile: async () => {
          if (!failed) {
            failed = true;
            throw new Error('once');
          }
        },
      });
    running.push(built);
    expect(built.controller).toBeInstanceOf(Controller);
    expect(built.controller.name).toBe('things');
    expect(await registry.getSingleMetricAsString('controller_runtime_max_concurrent_reconciles')).toContain(
      'controller_runtime_max_concurrent_reconciles{controller="things"} 3',
    );
    await built.start();
    cache.add(obj('a'));
    await eventually(() => delays.length === 1);
    expect(delays).toEqual(['ns/a']);
  });

  it('registers its event handlers only when the controller starts, and removes them when it stops', async () => {
    const things = new FakeCache('things').sync();
    const others = new FakeCache('others').sync();
    const { built } = build((b) => b.for(things).watches(others, { map: () => [] }));
    const [, leader] = built.runnables();
    expect(things.handlers.size + others.handlers.size).toBe(0);
    await leader.start(new AbortController().signal, ctx);
    expect([things.handlers.size, others.handlers.size]).toEqual([1, 1]);
    await leader.stop?.();
    expect(things.handlers.size + others.handlers.size).toBe(0);
  });
});

describe('ControllerBuilder: events to keys', () => {
  it('for(): an event enqueues the object itself; watches(): the keys its map returns, old and new', async () => {
    const things = new FakeCache('things').sync();
    const owners = new FakeCache('owners').sync();
    const { built, keys } = build((b) =>
      b.for(things).watches(owners, {
        map: (o) => (o.metadata?.labels?.thing ? [`ns/${o.metadata.labels.thing}`] : []),
      }),
    );
    await built.start();
    things.add(obj('a'));
    await eventually(() => keys.length === 1);
    // No label: nothing to reconcile. A moved label: both the old and the new target.
    owners.add(obj('o'));
    owners.update(obj('o', { thing: 'b' }), obj('o', { thing: 'c' }));
    await eventually(() => keys.length === 3);
    expect(keys).toEqual(['ns/a', 'ns/b', 'ns/c']);
  });

  it('applies the event filter to every source, before the source own predicate; both must pass', async () => {
    const things = new FakeCache('things').sync();
    const owners = new FakeCache('owners').sync();
    const asked: string[] = [];
    const { built, keys } = build((b) =>
      b
        .for(things, {
          predicate: (o) => {
            asked.push(`own:${o.metadata?.name}`);
            return o.metadata?.labels?.keep === 'yes';
          },
        })
        .watches(owners, { map: (o) => [`ns/of-${o.metadata?.name}`] })
        .withEventFilter((o, old) => {
          asked.push(`filter:${o.metadata?.name}`);
          return old === undefined && !o.metadata?.name?.startsWith('skip');
        }),
    );
    await built.start();
    things.add(obj('skip-1', { keep: 'yes' })); // the filter says no: the own predicate is not asked
    things.add(obj('dropped', { keep: 'no' })); // the own predicate says no
    things.update(obj('upd', { keep: 'yes' }), obj('upd', { keep: 'yes' })); // the filter drops updates
    owners.add(obj('skip-2')); // the filter applies to watches() too
    owners.add(obj('o'));
    things.add(obj('a', { keep: 'yes' }));
    await eventually(() => keys.length === 2);
    expect(keys).toEqual(['ns/of-o', 'ns/a']);
    expect(asked).toEqual([
      'filter:skip-1',
      'filter:dropped',
      'own:dropped',
      'filter:upd',
      'filter:skip-2',
      'filter:o',
      'filter:a',
      'own:a',
    ]);
  });
});

describe('ControllerRunnables: lifecycle', () => {
  it('the cache runnable starts the caches and resolves once all synced; stopping it stops them', async () => {
    const a = new FakeCache('a');
    const b = new FakeCache('b');
    const { built } = build((x) => x.for(a).watches(b, { map: () => [] }));
    const [caches] = built.runnables();
    let up = false;
    const starting = caches.start(new AbortController().signal, ctx).then(() => {
      up = true;
    });
    expect([a.starts, b.starts]).toEqual([1, 1]);
    a.sync();
    await Promise.resolve();
    expect(up).toBe(false);
    b.sync();
    await starting;
    expect(up).toBe(true);
    await caches.stop?.();
    expect([a.stopped, b.stopped, a.startedWith?.aborted, b.startedWith?.aborted]).toEqual([
      true,
      true,
      true,
      true,
    ]);
  });

  it('the leader runnable starts the caches too, refuses a second start, and resets the reconciler after stop', async () => {
    const things = new FakeCache('things').sync();
    const { built, resets } = build((b) => b.for(things));
    const [, leader] = built.runnables();
    await leader.start(new AbortController().signal, ctx);
    expect(things.starts).toBe(1);
    await expect(leader.start(new AbortController().signal, ctx)).rejects.toThrow('things already started');
    expect(resets()).toBe(0);
    await leader.stop?.();
    expect(resets()).toBe(1);
    // The caches outlive the controller: they are the cache runnable's to stop.
    expect(things.stopped).toBe(false);
  });

  it('hands over only after the controller ran, and standalone stop() skips it once grace aborted', async () => {
    const handOvers: Array<AbortSignal | undefined> = [];
    const handOver = async (grace?: AbortSignal): Promise<void> => {
      handOvers.push(grace);
    };
    const idle = build((b) => b.for(new FakeCache('idle').sync()).withHandOver(handOver), 'idle').built;
    const grace = new AbortController().signal;
    await idle.runnables()[1].handOver?.(grace);
    expect(handOvers).toEqual([]);

    const ran = build((b) => b.for(new FakeCache('ran').sync()).withHandOver(handOver), 'ran').built;
    const [, leader] = ran.runnables();
    await leader.start(new AbortController().signal, ctx);
    await leader.stop?.(grace);
    await leader.handOver?.(grace);
    expect(handOvers).toEqual([grace]);

    const standalone = build((b) => b.for(new FakeCache('s').sync()).withHandOver(handOver), 's').built;
    await standalone.start();
    const aborted = AbortSignal.abort();
    await standalone.stop(aborted);
    expect(handOvers).toEqual([grace]);
    const again = build((b) => b.for(new FakeCache('t').sync()).withHandOver(handOver), 't').built;
    await again.start();
    await again.stop();
    expect(handOvers).toEqual([grace, undefined]);
  });

  it('runs several controllers on shared caches as one pair of runnables (managed-workloads)', async () => {
    const pods = new FakeCache('pods').sync();
    const clock = new ManualClock();
    const controllers = ['pods', 'permits'].map((name) =>
      new Controller({ name, reconcile: async () => {}, clock }).watches(pods),
    );
    const set = new ControllerRunnables({ name: 'set', caches: [pods], controllers });
    running.push(set);
    const [caches, leader] = set.runnables();
    expect([caches.name, leader.name]).toEqual(['set-cache', 'set']);
    await leader.start(new AbortController().signal, ctx);
    expect(pods.handlers.size).toBe(2);
    await leader.stop?.();
    expect(pods.handlers.size).toBe(0);
  });
});

describe('refused builds: one-line errors', () => {
  const refusal = (fn: () => unknown): string => {
    try {
      fn();
    } catch (err) {
      const message = (err as Error).message;
      expect(message).not.toContain('\n');
      return message;
    }
    throw new Error('not refused');
  };
  const reconciler = { reconcile: async () => {} };

  it('no for(), for() twice, one cache watched twice, no name, complete() twice', () => {
    expect(refusal(() => new ControllerBuilder('x').complete(reconciler))).toBe(
      'controller x: for() is required',
    );
    expect(
      refusal(() =>
        new ControllerBuilder('x').watches(new FakeCache('b'), { map: () => [] }).complete(reconciler),
      ),
    ).toBe('controller x: for() is required');
    expect(refusal(() => new ControllerBuilder('x').for(new FakeCache('a')).for(new FakeCache('b')))).toBe(
      'controller x: for() called twice (a, b)',
    );
    const a = new FakeCache('a');
    expect(refusal(() => new ControllerBuilder('x').for(a).watches(a, { map: () => [] }))).toBe(
      'controller x: source a is watched twice',
    );
    expect(refusal(() => new ControllerBuilder(''))).toBe('controller builder: a name is required');
    const once = new ControllerBuilder('x').for(new FakeCache('a'));
    once.complete(reconciler);
    expect(refusal(() => once.complete(reconciler))).toBe('controller x: complete() called twice');
  });

  it('duplicate controller or cache names in one pair of runnables, or nothing to run', () => {
    const clock = new ManualClock();
    const controller = (name: string) => new Controller({ name, reconcile: async () => {}, clock });
    expect(
      refusal(
        () =>
          new ControllerRunnables({
            name: 'set',
            caches: [],
            controllers: [controller('a'), controller('a')],
          }),
      ),
    ).toBe('set: duplicate controller name a');
    expect(
      refusal(
        () =>
          new ControllerRunnables({
            name: 'set',
            caches: [new FakeCache('pods'), new FakeCache('pods')],
            controllers: [controller('a')],
          }),
      ),
    ).toBe('set: duplicate cache name pods');
    expect(refusal(() => new ControllerRunnables({ name: 'set', caches: [], controllers: [] }))).toBe(
      'set: no controllers to run',
    );
  });
});
