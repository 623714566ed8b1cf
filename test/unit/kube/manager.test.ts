import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import type { LeaderCallbacks, LeaderRunResult } from '../../../src/kube/leader.ts';
import {
  type Elector,
  type LifecycleEvent,
  Manager,
  type ManagerOptions,
  type ManagerResult,
  type Runnable,
  type RunnableGroup,
} from '../../../src/kube/manager.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { createRegistry } from '../../../src/observability/metrics.ts';

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
async function flush(n = 10): Promise<void> {
  for (let i = 0; i < n; i++) await tick();
}

function deferred<T = void>(): {
  promise: Promise<T>;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
} {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

class StubElector implements Elector {
  readonly identity = 'stub';
  readonly releasesOnCancel = true;
  leading = false;
  cancelled = false;
  runs = 0;
  /** What readHolder answers. */
  holder: string | undefined = '';
  #callbacks: LeaderCallbacks = {};
  #done = deferred<LeaderRunResult>();

  run(signal: AbortSignal, callbacks: LeaderCallbacks): Promise<LeaderRunResult> {
    this.runs++;
    this.#callbacks = callbacks;
    const done = deferred<LeaderRunResult>();
    this.#done = done;
    signal.addEventListener('abort', () => {
      this.cancelled = true;
      const led = this.leading;
      this.leading = false;
      if (led) callbacks.onStoppedLeading?.({ lost: false, released: true });
      done.resolve({ led, lost: false, released: led });
    });
    return done.promise;
  }

  async readHolder(): Promise<string | undefined> {
    return this.holder;
  }

  win(): void {
    this.leading = true;
    this.#callbacks.onStartedLeading?.(new AbortController().signal);
  }

  /** Another candidate is seen holding the Lease (by a running campaign). */
  observe(identity: string): void {
    this.holder = identity;
    this.#callbacks.onNewLeader?.(identity);
  }

  lose(): void {
    this.leading = false;
    this.#callbacks.onStoppedLeading?.({ lost: true, released: false });
    this.#done.resolve({ led: true, lost: true, released: false });
  }

  isLeader(): boolean {
    return this.leading;
  }
}

interface Probe extends Runnable {
  signal: AbortSignal | undefined;
  stopCalls: number;
  /** The grace signal the manager passed to stop(). */
  grace: AbortSignal | undefined;
}

function probe(
  name: string,
  opts: {
    leader?: boolean;
    group?: RunnableGroup;
    start?: (signal: AbortSignal) => Promise<void>;
    stop?: () => Promise<void>;
  } = {},
): Probe {
  const r: Probe = {
    name,
    needLeaderElection: opts.leader ?? false,
    ...(opts.group ? { group: opts.group } : {}),
    signal: undefined,
    stopCalls: 0,
    grace: undefined,
    async start(signal) {
      r.signal = signal;
      await opts.start?.(signal);
    },
    async stop(grace) {
      r.stopCalls++;
      r.grace = grace;
      await opts.stop?.();
    },
  };
  return r;
}

// Every manager is stopped and run to completion (its probe server closed) after each test.
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function setup(over: Partial<ManagerOptions> = {}) {
  const clock = new ManualClock();
  const events: string[] = [];
  const logLines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      logLines.push(String(chunk));
      cb();
    },
  });
  const manager = new Manager({
    logger: createLogger({ level: 'info', destination }),
    registry: createRegistry({ defaultMetrics: false }),
    healthProbeBindAddress: '127.0.0.1:0',
    metricsBindAddress: '0',
    gracefulShutdownTimeoutMs: 30_000,
    drainWindowMs: 5_000,
    clock,
    onEvent: (e: LifecycleEvent) => events.push(e.runnable ? `${e.step}:${e.runnable}` : e.step),
    ...over,
  });
  let running: Promise<ManagerResult> | undefined;
  const run = (): Promise<ManagerResult> => {
    running = manager.run();
    return running;
  };
  cleanups.push(async () => {
    manager.stop('test cleanup');
    if (running === undefined) return;
    let settled = false;
    void running.finally(() => {
      settled = true;
    });
    while (!settled) await clock.advanceAsync(60_000);
  });
  return { clock, events, manager, logLines, run };
}

async function readyz(manager: Manager): Promise<number> {
  const res = await fetch(`http://${manager.addresses?.health}/readyz`);
  await res.text();
  return res.status;
}

/** All five kinds of runnables, registered out of order on purpose. */
function fiveRunnables() {
  return {
    ctrl: probe('ctrl', { leader: true }),
    other: probe('other'),
    cache: probe('cache', { group: 'caches' }),
    admission: probe('admission', { group: 'webhooks' }),
    certs: probe('certs', { group: 'certificates' }),
  };
}

const START_ORDER = [
  'probe-server-started',
  'runnable-started:certs',
  'runnable-started:admission',
  'runnable-started:cache',
  'runnable-started:other',
  'ready',
  'leader-election-started',
  'elected',
  'runnable-started:ctrl',
];

describe('Manager start', () => {
  it('starts in DESIGN order, waiting for each group, and only runs leader work once elected', async () => {
    const elector = new StubElector();
    const { events, manager, logLines, run } = setup({ elector });
    const sync = deferred();
    const r = fiveRunnables();
    r.cache.start = async (signal) => {
      r.cache.signal = signal;
      await sync.promise;
    };
    for (const x of [r.ctrl, r.other, r.cache, r.admission, r.certs]) manager.add(x);
    const done = run();
    await flush();
    // The cache has not synced: nothing after it has started and the replica is not ready.
    expect(events).toEqual(START_ORDER.slice(0, 3));
    expect(await readyz(manager)).toBe(500);
    sync.resolve();
    await flush();
    expect(events).toEqual(START_ORDER.slice(0, 7));
    expect(await readyz(manager)).toBe(200);
    expect(r.ctrl.signal).toBeUndefined();
    elector.win();
    await flush();
    expect(events).toEqual(START_ORDER);
    await manager.elected;
    // The bound addresses are logged for whoever started us.
    const line = logLines.map((l) => JSON.parse(l)).find((l) => l.msg === 'probe server listening');
    expect(line?.health).toBe(manager.addresses?.health);
    expect(line?.health).toMatch(/^127\.0\.0\.1:\d+$/);
    manager.stop();
    await flush();
    expect(events).not.toContain('probe-server-stopped'); // still draining
    void done;
  });

  it('starts leader-only runnables right after ready when leader election is off', async () => {
    const { events, manager, clock, run } = setup();
    const r = fiveRunnables();
    for (const x of Object.values(r)) manager.add(x);
    const done = run();
    await flush();
    expect(events).toEqual([...START_ORDER.slice(0, 6), 'elected', 'runnable-started:ctrl']);
    manager.stop();
    await clock.advanceAsync(5_000);
    expect((await done).exitCode).toBe(0);
  });

  it('fails the start when a runnable cannot start, stopping what already started', async () => {
    const { events, manager, run } = setup();
    const r = fiveRunnables();
    r.cache.start = async () => {
      throw new Error('cannot list pods: 403');
    };
    for (const x of Object.values(r)) manager.add(x);
    const result = await run();
    expect(result).toEqual({ exitCode: 1, reason: 'start failed: cache: cannot list pods: 403' });
    expect(r.other.signal).toBeUndefined();
    expect(r.ctrl.signal).toBeUndefined();
    expect(r.admission.stopCalls).toBe(1);
    expect(r.certs.stopCalls).toBe(1);
    expect(events).not.toContain('ready');
    expect(events).not.toContain('drained'); // never ready, so nothing to drain
    expect(events.at(-1)).toBe('probe-server-stopped');
  });

  it('can be stopped while a cache is still syncing', async () => {
    const { events, manager, run } = setup();
    const cache = probe('cache', {
      group: 'caches',
      start: (signal) =>
        new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
    });
    const other = probe('other');
    manager.add(cache);
    manager.add(other);
    const done = run();
    await flush();
    manager.stop('SIGTERM');
    const result = await done;
    expect(result).toEqual({ exitCode: 0, reason: 'SIGTERM' });
    expect(cache.signal?.aborted).toBe(true);
    expect(other.signal).toBeUndefined();
    expect(events).toEqual([
      'probe-server-started',
      'shutdown-requested',
      'not-ready',
      'runnable-stopped:cache',
      'probe-server-stopped',
    ]);
  });
});

describe('Manager graceful stop', () => {
  it('drops readiness first, drains with webhooks serving, stops controllers, releases, then closes servers', async () => {
    const elector = new StubElector();
    const inFlight = deferred();
    const { clock, events, manager, run } = setup({ elector });
    const r = fiveRunnables();
    r.ctrl.stop = async () => {
      r.ctrl.stopCalls++;
      await inFlight.promise; // a reconcile still running
    };
    for (const x of Object.values(r)) manager.add(x);
    const done = run();
    await flush();
    elector.win();
    await flush();
    events.length = 0;

    manager.stop('SIGTERM');
    await flush();
    expect(events).toEqual(['shutdown-requested', 'not-ready']);
    expect(await readyz(manager)).toBe(500);
    // During the drain window everything still runs, the webhooks included.
    await clock.advanceAsync(4_999);
    expect(events).toEqual(['shutdown-requested', 'not-ready']);
    expect(r.admission.signal?.aborted).toBe(false);
    expect(r.ctrl.signal?.aborted).toBe(false);
    expect(elector.leading).toBe(true);

    await clock.advanceAsync(1);
    await flush();
    // Controllers are told to stop; the Lease is kept until their in-flight work is done.
    expect(events).toEqual(['shutdown-requested', 'not-ready', 'drained']);
    expect(r.ctrl.signal?.aborted).toBe(true);
    expect(elector.cancelled).toBe(false);
    expect(r.admission.signal?.aborted).toBe(false);

    inFlight.resolve();
    const result: ManagerResult = await done;
    expect(result).toEqual({ exitCode: 0, reason: 'SIGTERM' });
    expect(events).toEqual([
      'shutdown-requested',
      'not-ready',
      'drained',
      'runnable-stopped:ctrl',
      'leader-election-stopped',
      'runnable-stopped:other',
      'runnable-stopped:cache',
      'runnable-stopped:admission',
      'runnable-stopped:certs',
      'probe-server-stopped',
    ]);
    expect(elector.cancelled).toBe(true);
    await expect(fetch(`http://${manager.addresses?.health}/healthz`)).rejects.toThrow();
  });

  it('tells the running runnables to drain once, right after readiness fails', async () => {
    const { events, manager, run } = setup();
    const r = fiveRunnables();
    const drained: string[] = [];
    for (const x of Object.values(r)) {
      x.drain = () => drained.push(`${x.name}@${events.at(-1)}`);
      manager.add(x);
    }
    void run();
    await flush();
    expect(drained).toEqual([]);
    manager.stop('SIGTERM');
    manager.stop('SIGTERM again');
    await flush();
    // Every runnable once, after not-ready and before the drain window ends (no "drained" yet).
    expect(drained.sort()).toEqual(
      ['admission', 'cache', 'certs', 'ctrl', 'other'].map((n) => `${n}@not-ready`).sort(),
    );
  });

  it('gives up after the graceful shutdown timeout and exits 1', async () => {
    const { clock, events, manager, run } = setup({
      gracefulShutdownTimeoutMs: 10_000,
      drainWindowMs: 1_000,
    });
    const stuck = probe('stuck', { leader: true, stop: () => new Promise(() => {}) });
    const webhook = probe('webhook', { group: 'webhooks' });
    manager.add(stuck);
    manager.add(webhook);
    const done = run();
    await flush();
    manager.stop();
    await clock.advanceAsync(9_999);
    expect(events).not.toContain('probe-server-stopped');
    // The stuck runnable was told to stop with a grace signal that is still running.
    expect(stuck.grace?.aborted).toBe(false);
    await clock.advanceAsync(1);
    expect(await done).toEqual({ exitCode: 1, reason: 'graceful shutdown timed out' });
    // Its in-flight work is abandoned (a Controller aborts its reconciles' signals).
    expect(stuck.grace?.aborted).toBe(true);
    expect(webhook.signal?.aborted).toBe(true);
    expect(events.at(-1)).toBe('probe-server-stopped');
    expect(clock.pending()).toBe(0);
  });

  it('shuts down with exit code 1 when a runnable reports a fatal error', async () => {
    const { clock, manager, run } = setup({ drainWindowMs: 0 });
    let fail: ((e: unknown) => void) | undefined;
    manager.add({
      name: 'server',
      needLeaderElection: false,
      async start(_signal, ctx) {
        fail = ctx.fail;
      },
    });
    const done = run();
    await flush();
    fail?.(new Error('listener closed'));
    await clock.advanceAsync(0);
    expect(await done).toEqual({ exitCode: 1, reason: 'server failed: listener closed' });
  });
});

describe('Manager on lost leadership', () => {
  it('aborts leader-only work at once and exits 1 without draining', async () => {
    const elector = new StubElector();
    const { events, manager, run } = setup({ elector });
    const r = fiveRunnables();
    for (const x of Object.values(r)) manager.add(x);
    const done = run();
    await flush();
    elector.win();
    await flush();
    events.length = 0;
    elector.lose();
    // Synchronously, before any other turn of the event loop.
    expect(r.ctrl.signal?.aborted).toBe(true);
    expect(events[0]).toBe('leadership-lost');
    const result = await done; // no clock advance: no drain window
    expect(result).toEqual({ exitCode: 1, reason: 'leader election lost' });
    // Stopped without grace: in-flight work is abandoned at once.
    expect(r.ctrl.grace?.aborted).toBe(true);
    expect(events).not.toContain('drained');
    expect(r.admission.signal?.aborted).toBe(true);
    expect(events.at(-1)).toBe('probe-server-stopped');
  });
});

describe('Manager hand-over on a graceful stop', () => {
  /** A leader-only runnable with hand-over work, counting its calls. */
  function withHandOver(): Probe & { handOvers: number } {
    const r = Object.assign(probe('ctrl', { leader: true }), { handOvers: 0 });
    r.handOver = async () => {
      r.handOvers++;
    };
    return r;
  }

  async function leading(over: Partial<ManagerOptions>) {
    const elector = new StubElector();
    const ctx = setup({ elector, drainWindowMs: 0, ...over });
    const ctrl = withHandOver();
    ctx.manager.add(ctrl);
    ctx.manager.add(probe('admission', { group: 'webhooks' }));
    const done = ctx.run();
    await flush();
    elector.win();
    await flush();
    ctx.events.length = 0;
    return { ...ctx, elector, ctrl, done };
  }

  it('without a wait, hands over while still leading, then releases', async () => {
    const { elector, ctrl, done, events, manager } = await leading({});
    manager.stop('SIGTERM');
    expect((await done).exitCode).toBe(0);
    expect(ctrl.handOvers).toBe(1);
    expect(elector.runs).toBe(1);
    expect(events.slice(0, 5)).toEqual([
      'shutdown-requested',
      'not-ready',
      'runnable-stopped:ctrl',
      'handed-over:ctrl',
      'leader-election-stopped',
    ]);
  });

  it('leaves the work to a successor that takes the Lease within the wait', async () => {
    const { clock, elector, ctrl, done, events, manager } = await leading({ handOverWaitMs: 6_000 });
    manager.stop('SIGTERM');
    await flush();
    expect(events).toContain('leader-election-stopped');
    await clock.advanceAsync(2_000);
    expect(events).not.toContain('successor-took-over');
    elector.holder = 'replica-b';
    await clock.advanceAsync(250);
    expect((await done).exitCode).toBe(0);
    expect(events).toContain('successor-took-over');
    expect(ctrl.handOvers).toBe(0);
    expect(elector.runs).toBe(1);
  });

  it('leads once more and hands over when no successor appears within the wait', async () => {
    const { clock, elector, ctrl, done, events, manager } = await leading({ handOverWaitMs: 6_000 });
    manager.stop('SIGTERM');
    await flush();
    await clock.advanceAsync(5_999);
    expect(elector.runs).toBe(1);
    await clock.advanceAsync(1);
    await flush();
    // Campaigning again, for the hand-over only: the controllers stay stopped.
    expect(elector.runs).toBe(2);
    elector.win();
    expect((await done).exitCode).toBe(0);
    expect(ctrl.handOvers).toBe(1);
    expect(ctrl.signal?.aborted).toBe(true);
    expect(events.filter((e) => e.startsWith('runnable-started'))).toEqual([]);
    expect(events).toContain('handed-over:ctrl');
    // The second leadership was given up once the hand-over was done.
    expect(elector.leading).toBe(false);
  });

  it('lets a candidate seen while campaigning again have the work', async () => {
    const { clock, elector, ctrl, done, events, manager } = await leading({ handOverWaitMs: 6_000 });
    manager.stop('SIGTERM');
    await flush();
    await clock.advanceAsync(6_000);
    await flush();
    expect(elector.runs).toBe(2);
    elector.observe('replica-c');
    expect((await done).exitCode).toBe(0);
    expect(ctrl.handOvers).toBe(0);
    expect(events).toContain('successor-took-over');
  });

  it('hands nothing over when this replica never led, and stops campaigning at once', async () => {
    const elector = new StubElector();
    const { clock, events, manager, run } = setup({ elector, handOverWaitMs: 6_000 });
    const ctrl = withHandOver();
    manager.add(ctrl);
    const done = run();
    await flush();
    manager.stop('SIGTERM');
    await flush();
    // Still in the drain window, and already out of the election.
    expect(events).not.toContain('drained');
    expect(elector.cancelled).toBe(true);
    await clock.advanceAsync(5_000);
    await expect(done).resolves.toEqual({ exitCode: 0, reason: 'SIGTERM' });
    expect(ctrl.handOvers).toBe(0);
    expect(elector.runs).toBe(1);
  });
});
