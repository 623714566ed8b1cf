import fc from 'fast-check';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import { ItemExponentialFailureRateLimiter } from '../../../src/kube/ratelimit.ts';
import { WORKQUEUE_DURATION_BUCKETS, WorkQueue } from '../../../src/kube/workqueue.ts';

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Resolves `true` if `p` settles within a few event-loop turns, `false` if it is still pending. */
async function settles(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  for (let i = 0; i < 5; i++) await tick();
  return settled;
}

function newQueue(clock = new ManualClock(0), registry?: Registry): WorkQueue<string> {
  return new WorkQueue<string>({ name: 'test', clock, ...(registry ? { registry } : {}) });
}

describe('WorkQueue basics', () => {
  it('de-duplicates keys while they wait and serves them FIFO', async () => {
    const q = newQueue();
    q.add('a');
    q.add('b');
    q.add('a');
    q.add('c');
    q.add('b');
    expect(q.len()).toBe(3);
    expect([await q.get(), await q.get(), await q.get()]).toEqual(['a', 'b', 'c']);
    expect(q.len()).toBe(0);
  });

  it('get() waits for an item, and waiting getters are served in order', async () => {
    const q = newQueue();
    const first = q.get();
    const second = q.get();
    expect(await settles(first)).toBe(false);
    q.add('x');
    q.add('y');
    expect(await first).toBe('x');
    expect(await second).toBe('y');
  });

  it('never hands a key to a second worker: an add during processing is served after done', async () => {
    const q = newQueue();
    q.add('a');
    const item = await q.get();
    expect(item).toBe('a');
    q.add('a'); // changed again while a worker holds it
    q.add('a');
    expect(q.len()).toBe(0);
    const second = q.get();
    expect(await settles(second)).toBe(false);
    q.done('a');
    expect(await second).toBe('a');
    q.done('a');
    expect(q.len()).toBe(0);
    expect(await settles(q.get())).toBe(false);
  });

  it('done() for a key that is not being processed changes nothing', async () => {
    const q = newQueue();
    q.add('a');
    q.done('a');
    q.done('zzz');
    expect(q.len()).toBe(1);
    expect(await q.get()).toBe('a');
  });

  it('keeps each key with one worker at a time under concurrent workers, and misses no add', async () => {
    const q = newQueue();
    const keys = Array.from({ length: 8 }, (_, i) => `k${i}`);
    const holders = new Map<string, number>();
    const lastAdd = new Map<string, number>();
    const lastStart = new Map<string, number>();
    let seq = 0;
    let maxConcurrentPerKey = 0;
    let processed = 0;

    const worker = async (): Promise<void> => {
      for (let key = await q.get(); key !== undefined; key = await q.get()) {
        const n = (holders.get(key) ?? 0) + 1;
        holders.set(key, n);
        maxConcurrentPerKey = Math.max(maxConcurrentPerKey, n);
        lastStart.set(key, seq++);
        for (let i = 0; i < processed % 3; i++) await tick();
        holders.set(key, n - 1);
        processed++;
        q.done(key);
      }
    };
    const workers = Array.from({ length: 4 }, worker);

    for (let i = 0; i < 400; i++) {
      const key = keys[(i * 7 + (i >> 3)) % keys.length] as string;
      lastAdd.set(key, seq++);
      q.add(key);
      if (i % 5 === 0) await tick();
    }
    for (let i = 0; i < 1000 && (q.len() > 0 || [...holders.values()].some((n) => n > 0)); i++) await tick();
    await q.shutDownWithDrain();
    await Promise.all(workers);

    expect(maxConcurrentPerKey).toBe(1);
    expect(processed).toBeGreaterThanOrEqual(keys.length);
    expect(processed).toBeLessThan(400); // de-duplication collapsed repeated adds
    for (const key of keys) expect(lastStart.get(key)).toBeGreaterThan(lastAdd.get(key) as number);
  });

  it('model check: random add/get/done schedules keep client-go invariants', async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('add' as const), key: fc.constantFrom('a', 'b', 'c') }),
      fc.record({ kind: fc.constant('get' as const) }),
      fc.record({ kind: fc.constant('done' as const), pick: fc.nat() }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 60 }), async (ops) => {
        const q = newQueue();
        const held: string[] = [];
        // Model: a key needs processing if added since it was last handed out.
        const dirty = new Set<string>();
        for (const o of ops) {
          if (o.kind === 'add') {
            q.add(o.key);
            dirty.add(o.key);
          } else if (o.kind === 'get') {
            if (q.len() === 0) continue;
            const key = (await q.get()) as string;
            if (held.includes(key) || !dirty.has(key)) return false;
            dirty.delete(key);
            held.push(key);
          } else if (held.length > 0) {
            const [key] = held.splice(o.pick % held.length, 1);
            q.done(key as string);
          }
          // Ready = dirty and not held.
          const ready = [...dirty].filter((k) => !held.includes(k)).length;
          if (q.len() !== ready) return false;
        }
        return true;
      }),
      { numRuns: 200 },
    );
  });
});

describe('WorkQueue delays and rate limiting', () => {
  it('addAfter releases items in ready-time order as the clock advances', async () => {
    const clock = new ManualClock(0);
    const q = newQueue(clock);
    q.addAfter('slow', 300);
    q.addAfter('fast', 100);
    q.addAfter('mid', 200);
    q.addAfter('now', 0);
    expect(q.len()).toBe(1);
    expect(await q.get()).toBe('now');
    clock.advance(99);
    expect(q.len()).toBe(0);
    clock.advance(1);
    expect(q.len()).toBe(1);
    clock.advance(250);
    expect(q.len()).toBe(3);
    expect([await q.get(), await q.get(), await q.get()]).toEqual(['fast', 'mid', 'slow']);
  });

  it('a repeated addAfter keeps the sooner time, and an add meanwhile is not duplicated', async () => {
    const clock = new ManualClock(0);
    const q = newQueue(clock);
    q.addAfter('a', 1000);
    q.addAfter('a', 100); // sooner: replaces
    q.addAfter('a', 5000); // later: ignored
    clock.advance(100);
    expect(q.len()).toBe(1);
    expect(await q.get()).toBe('a');
    q.done('a');
    clock.advance(10_000);
    expect(q.len()).toBe(0);

    q.addAfter('b', 50);
    q.add('b');
    clock.advance(50);
    expect(q.len()).toBe(1); // the delayed add found 'b' already waiting
  });

  it('a waiting get() is woken by a delayed add', async () => {
    const clock = new ManualClock(0);
    const q = newQueue(clock);
    const got = q.get();
    q.addAfter('later', 1000);
    expect(await settles(got)).toBe(false);
    clock.advance(1000);
    expect(await got).toBe('later');
  });

  it('addRateLimited backs off 5, 10, 20 ms per key; forget resets it', async () => {
    const clock = new ManualClock(0);
    const q = newQueue(clock);
    const delays: number[] = [];
    for (let attempt = 0; attempt < 4; attempt++) {
      const start = clock.now();
      q.addRateLimited('a');
      while (q.len() === 0) clock.runNext();
      delays.push(clock.now() - start);
      expect(await q.get()).toBe('a');
      q.done('a');
    }
    expect(delays).toEqual([5, 10, 20, 40]);
    expect(q.numRequeues('a')).toBe(4);
    q.forget('a');
    expect(q.numRequeues('a')).toBe(0);
    q.addRateLimited('a');
    clock.advance(4);
    expect(q.len()).toBe(0);
    clock.advance(1);
    expect(q.len()).toBe(1);
  });

  it('uses an injected rate limiter', () => {
    const clock = new ManualClock(0);
    const q = new WorkQueue<string>({
      name: 'custom',
      clock,
      rateLimiter: new ItemExponentialFailureRateLimiter(1000, 60_000),
    });
    q.addRateLimited('x');
    clock.advance(999);
    expect(q.len()).toBe(0);
    clock.advance(1);
    expect(q.len()).toBe(1);
  });
});

describe('WorkQueue shutdown', () => {
  it('releases waiting getters, hands out nothing more and ignores new adds', async () => {
    const clock = new ManualClock(0);
    const q = newQueue(clock);
    const waiting = q.get();
    q.addAfter('delayed', 100);
    q.shutDown();
    expect(await waiting).toBeUndefined();
    q.add('x');
    q.addRateLimited('y');
    clock.advance(1000);
    expect(q.len()).toBe(0);
    expect(await q.get()).toBeUndefined();
    expect(q.isShuttingDown()).toBe(true);
    expect(clock.pending()).toBe(0);
  });

  it('shutDownWithDrain waits for every in-flight item to be done', async () => {
    const q = newQueue();
    q.add('a');
    q.add('b');
    q.add('c');
    const a = (await q.get()) as string;
    const b = (await q.get()) as string;
    const drained = q.shutDownWithDrain();
    expect(await settles(drained)).toBe(false);
    expect(await q.get()).toBeUndefined(); // 'c' is not handed out once shutting down
    q.done(a);
    expect(await settles(drained)).toBe(false);
    q.done(b);
    expect(await settles(drained)).toBe(true);
  });

  it('shutDownWithDrain ends when an item re-added while in flight is done (it is not handed out again)', async () => {
    // A controller's reconcile patches its object; the watch event re-adds the key before the reconcile
    // returns; then the controller stops. The drain used to wait for that queued key forever.
    const q = newQueue();
    q.add('a');
    q.add('b');
    const a = (await q.get()) as string;
    const b = (await q.get()) as string;
    q.add(a);
    const drained = q.shutDownWithDrain();
    q.done(b);
    expect(await settles(drained)).toBe(false); // 'a' is still in flight
    q.done(a);
    expect(await settles(drained)).toBe(true);
    expect(await q.get()).toBeUndefined();
  });

  it('shutDownWithDrain resolves at once when nothing is in flight', async () => {
    const q = newQueue();
    q.add('a');
    expect(await settles(q.shutDownWithDrain())).toBe(true);
  });
});

type Sample = { value: number; labels: Record<string, unknown>; metricName?: string };

/** One sample of a metric; `suffix` picks a histogram series (`_sum`, `_count`, `_bucket`). */
async function value(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
  suffix = '',
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (metric === undefined) throw new Error(`no metric ${name}`);
  const samples = (await metric.get()).values as Sample[];
  const match = samples.find(
    (v) =>
      (suffix === '' || v.metricName === `${name}${suffix}`) &&
      Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want),
  );
  if (match === undefined) throw new Error(`no ${name}${suffix} sample with ${JSON.stringify(labels)}`);
  return match.value;
}

describe('WorkQueue metrics', () => {
  const q1 = { name: 'test', controller: 'test' };

  it('exports controller-runtime’s names, labels and buckets', async () => {
    const registry = new Registry();
    newQueue(new ManualClock(0), registry);
    const text = await registry.metrics();
    for (const name of [
      'workqueue_depth',
      'workqueue_adds_total',
      'workqueue_queue_duration_seconds',
      'workqueue_work_duration_seconds',
      'workqueue_retries_total',
      'workqueue_unfinished_work_seconds',
      'workqueue_longest_running_processor_seconds',
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
    expect(text).toContain('workqueue_depth{name="test",controller="test",priority=""} 0');
    expect(WORKQUEUE_DURATION_BUCKETS).toHaveLength(12);
    expect(WORKQUEUE_DURATION_BUCKETS[0]).toBeCloseTo(1e-8, 20);
    expect(WORKQUEUE_DURATION_BUCKETS[11]).toBeCloseTo(1000, 6);
    for (const name of ['workqueue_queue_duration_seconds', 'workqueue_work_duration_seconds']) {
      const hist = (await registry.getSingleMetric(name)?.get())?.values as Sample[];
      const buckets = hist.filter((v) => v.metricName === `${name}_bucket`);
      expect(buckets.map((v) => String(v.labels.le))).toEqual([
        ...WORKQUEUE_DURATION_BUCKETS.map(String),
        '+Inf',
      ]);
      expect(buckets.every((v) => v.labels.name === 'test' && v.labels.controller === 'test')).toBe(true);
    }
  });

  it('counts adds, depth, queue and work durations, retries and in-progress work', async () => {
    const clock = new ManualClock(0);
    const registry = new Registry();
    const q = newQueue(clock, registry);

    q.add('a');
    q.add('a'); // de-duplicated: not an add
    q.add('b');
    expect(await value(registry, 'workqueue_adds_total', q1)).toBe(2);
    expect(await value(registry, 'workqueue_depth', { ...q1, priority: '' })).toBe(2);

    clock.advance(2000);
    await q.get(); // 'a' waited 2 s
    expect(await value(registry, 'workqueue_depth', q1)).toBe(1);
    expect(await value(registry, 'workqueue_queue_duration_seconds', q1, '_sum')).toBe(2);
    expect(await value(registry, 'workqueue_queue_duration_seconds', q1, '_count')).toBe(1);
    expect(await value(registry, 'workqueue_queue_duration_seconds', { ...q1, le: '1' }, '_bucket')).toBe(0);
    expect(await value(registry, 'workqueue_queue_duration_seconds', { ...q1, le: '10' }, '_bucket')).toBe(1);
    clock.advance(500);
    expect(await value(registry, 'workqueue_unfinished_work_seconds', q1)).toBeCloseTo(0.5);
    await q.get(); // 'b' starts at 2.5 s
    clock.advance(1000);
    expect(await value(registry, 'workqueue_unfinished_work_seconds', q1)).toBeCloseTo(2.5);
    expect(await value(registry, 'workqueue_longest_running_processor_seconds', q1)).toBeCloseTo(1.5);

    q.done('a');
    expect(await value(registry, 'workqueue_work_duration_seconds', q1, '_sum')).toBeCloseTo(1.5);
    expect(await value(registry, 'workqueue_work_duration_seconds', q1, '_count')).toBe(1);
    expect(await value(registry, 'workqueue_unfinished_work_seconds', q1)).toBeCloseTo(1);

    q.addAfter('c', 10);
    q.addRateLimited('d');
    expect(await value(registry, 'workqueue_retries_total', q1)).toBe(2);

    q.done('b');
    q.shutDown();
    clock.advance(60_000);
    expect(await value(registry, 'workqueue_unfinished_work_seconds', q1)).toBe(0);
    expect(await value(registry, 'workqueue_longest_running_processor_seconds', q1)).toBe(0);
  });

  it('an add during processing counts as an add and its wait is measured from that add', async () => {
    const clock = new ManualClock(0);
    const registry = new Registry();
    const q = newQueue(clock, registry);
    q.add('a');
    await q.get();
    clock.advance(1000);
    q.add('a');
    expect(await value(registry, 'workqueue_adds_total', q1)).toBe(2);
    expect(await value(registry, 'workqueue_depth', q1)).toBe(1);
    clock.advance(3000);
    q.done('a');
    await q.get();
    expect(await value(registry, 'workqueue_depth', q1)).toBe(0);
    // 0 s for the first get + 3 s for the second
    expect(await value(registry, 'workqueue_queue_duration_seconds', q1, '_sum')).toBeCloseTo(3);
    expect(await value(registry, 'workqueue_queue_duration_seconds', q1, '_count')).toBe(2);
  });

  it('several queues share one registry without colliding; registries stay independent', async () => {
    const registry = new Registry();
    const other = new Registry();
    const a = new WorkQueue<string>({ name: 'alpha', registry });
    const b = new WorkQueue<string>({ name: 'beta', registry });
    new WorkQueue<string>({ name: 'alpha', registry: other });
    a.add('x');
    b.add('x');
    b.add('y');
    expect(await value(registry, 'workqueue_adds_total', { name: 'alpha', controller: 'alpha' })).toBe(1);
    expect(await value(registry, 'workqueue_adds_total', { name: 'beta', controller: 'beta' })).toBe(2);
    expect(await value(other, 'workqueue_adds_total', { name: 'alpha' })).toBe(0);
    a.shutDown();
    b.shutDown();
  });
});
