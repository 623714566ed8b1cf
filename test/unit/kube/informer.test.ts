import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import { Informer, type InformerOptions, stripManagedFields } from '../../../src/kube/informer.ts';
import { objectKey } from '../../../src/kube/keys.ts';
import type { KubeRequester, RawRequest, RawResponse } from '../../../src/kube/transport.ts';
import { type Obj, obj } from './objects.ts';

const flush = async (n = 10): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe('stripManagedFields', () => {
  it('drops metadata.managedFields and keeps the rest', () => {
    const o = obj('a', '1');
    o.metadata = { ...o.metadata, managedFields: [{ manager: 'kubectl' }] };
    expect(stripManagedFields(o).metadata).toEqual({ name: 'a', namespace: 'ns', resourceVersion: '1' });
  });
});

// ---- the informer against a scripted API ----

interface FakeWatch {
  req: RawRequest;
  at: number;
  send(type: string, object: unknown): void;
  close(): void;
  fail(err: Error): void;
  readonly closed: boolean;
}

type Responder = (req: RawRequest) => RawResponse | undefined;

/** A scripted API: lists serve `objects`, watches stay open until the test pushes or closes them. */
class FakeApi implements KubeRequester {
  readonly objects = new Map<string, Obj>();
  rv = 10;
  readonly requests: Array<{ at: number; req: RawRequest }> = [];
  readonly watches: FakeWatch[] = [];
  /** Consulted first; undefined falls through to the normal behaviour. */
  readonly overrides: Responder[] = [];
  readonly clock: ManualClock;

  constructor(clock: ManualClock) {
    this.clock = clock;
  }

  put(o: Obj): Obj {
    this.rv++;
    const stored = { ...o, metadata: { ...o.metadata, resourceVersion: String(this.rv) } };
    this.objects.set(objectKey(stored), stored);
    return stored;
  }

  lists(): RawRequest[] {
    return this.requests.filter((r) => r.req.query?.watch === undefined).map((r) => r.req);
  }

  async request(req: RawRequest): Promise<RawResponse> {
    this.requests.push({ at: this.clock.now(), req });
    for (const o of this.overrides) {
      const res = o(req);
      if (res !== undefined) return res;
    }
    if (req.query?.watch === undefined) {
      return json(200, {
        apiVersion: 'v1',
        kind: 'PodList',
        metadata: { resourceVersion: String(this.rv) },
        items: [...this.objects.values()].map((o) => {
          const { apiVersion: _a, kind: _k, ...rest } = structuredClone(o);
          return rest;
        }),
      });
    }
    return this.#openWatch(req);
  }

  #openWatch(req: RawRequest): RawResponse {
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    let closed = false;
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        controller = c;
      },
    });
    const encoder = new TextEncoder();
    const watch: FakeWatch = {
      req,
      at: this.clock.now(),
      send(type, object) {
        if (!closed) controller.enqueue(encoder.encode(`${JSON.stringify({ type, object })}\n`));
      },
      close() {
        if (closed) return;
        closed = true;
        controller.close();
      },
      fail(err) {
        if (closed) return;
        closed = true;
        controller.error(err);
      },
      get closed() {
        return closed;
      },
    };
    req.signal?.addEventListener('abort', () => watch.fail(new Error('aborted')), { once: true });
    this.watches.push(watch);
    return { status: 200, headers: {}, text: async () => '', stream: () => stream };
  }

  lastWatch(): FakeWatch {
    const w = this.watches.at(-1);
    if (w === undefined) throw new Error('no watch opened');
    return w;
  }
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): RawResponse {
  const text = JSON.stringify(body);
  return { status, headers, text: async () => text, stream: () => null };
}

function statusBody(code: number, reason: string, retryAfterSeconds?: number): unknown {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    code,
    reason,
    message: `injected ${code}`,
    ...(retryAfterSeconds ? { details: { retryAfterSeconds } } : {}),
  };
}

const running: Informer<Obj>[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
});

function setup(options: Partial<InformerOptions<Obj>> = {}) {
  const clock = new ManualClock();
  const api = new FakeApi(clock);
  const events: string[] = [];
  const informer = new Informer<Obj>({
    name: 'pods',
    transport: api,
    resource: { version: 'v1', plural: 'pods', namespace: 'ns' },
    clock,
    random: () => 0.5,
    watchTimeoutSeconds: 300,
    ...options,
  });
  informer.addEventHandler({
    onAdd: (o) => {
      events.push(`add ${objectKey(o)}@${o.metadata?.resourceVersion}`);
    },
    onUpdate: (old, o, relisted) => {
      events.push(
        `update ${objectKey(o)}@${old.metadata?.resourceVersion}->${o.metadata?.resourceVersion}${relisted ? ' (relist)' : ''}`,
      );
    },
    onDelete: (o, unknown) => {
      events.push(`delete ${objectKey(o)}${unknown ? ' (relist)' : ''}`);
    },
  });
  running.push(informer);
  return { clock, api, informer, events };
}

describe('Informer', () => {
  it('lists, syncs, then applies watch events in order; the cache and indexes follow', async () => {
    const { api, informer, events } = setup({ labelSelector: 'app=x', fieldSelector: 'spec.nodeName=n1' });
    informer.addIndexer('node', (o) => (o.spec?.node ? [o.spec.node] : []));
    api.put(obj('a', '', { spec: { node: 'n1' } }));
    informer.start();
    await informer.waitForSync();
    expect(informer.hasSynced()).toBe(true);
    expect(informer.get('ns/a')?.kind).toBe('Pod'); // filled in from the list kind
    expect(api.lists()[0]?.query).toMatchObject({
      labelSelector: 'app=x',
      fieldSelector: 'spec.nodeName=n1',
      limit: 500,
    });
    await flush();
    const w = api.lastWatch();
    expect(w.req.path).toBe('/api/v1/namespaces/ns/pods');
    expect(w.req.query).toMatchObject({
      watch: true,
      resourceVersion: '11',
      allowWatchBookmarks: true,
      timeoutSeconds: 300,
      labelSelector: 'app=x',
    });

    w.send('ADDED', obj('b', '12', { spec: { node: 'n1' } }));
    w.send('MODIFIED', obj('a', '13', { spec: { node: 'n2' } }));
    w.send('DELETED', obj('b', '14', { spec: { node: 'n1' } }));
    w.send('BOOKMARK', { kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: '20' } });
    await flush();
    expect(events).toEqual(['add ns/a@11', 'add ns/b@12', 'update ns/a@11->13', 'delete ns/b']);
    expect(informer.byIndex('node', 'n2').map(objectKey)).toEqual(['ns/a']);
    expect(informer.byIndex('node', 'n1')).toEqual([]);
    expect(informer.list('ns').map(objectKey)).toEqual(['ns/a']);
    expect(informer.list('other')).toEqual([]);
    expect(informer.lastResourceVersion()).toBe('20');
  });

  it('pages through a large list with limit/continue', async () => {
    const { api, informer } = setup({ pageSize: 2 });
    api.overrides.push((req) => {
      if (req.query?.watch !== undefined) return undefined;
      const page = req.query?.continue === undefined ? 0 : Number(req.query.continue);
      const items = [obj(`p${page * 2}`, '5'), obj(`p${page * 2 + 1}`, '5')];
      return json(200, {
        kind: 'PodList',
        apiVersion: 'v1',
        metadata: { resourceVersion: '5', ...(page < 2 ? { continue: String(page + 1) } : {}) },
        items,
      });
    });
    informer.start();
    await informer.waitForSync();
    expect(informer.size).toBe(6);
    expect(api.lists().map((r) => r.query?.continue)).toEqual([undefined, '1', '2']);
  });

  it('relists on a 410 ERROR event, emitting deletes for objects that vanished meanwhile', async () => {
    const { api, informer, events } = setup();
    api.put(obj('keep', ''));
    api.put(obj('change', ''));
    api.put(obj('vanish', ''));
    informer.start();
    await informer.waitForSync();
    await flush();
    // While "disconnected": one deleted, one changed, one created; then the watch learns it is too old.
    api.objects.delete('ns/vanish');
    api.put(obj('change', ''));
    api.put(obj('new', ''));
    api.lastWatch().send('ERROR', statusBody(410, 'Expired'));
    await flush(20);
    expect(events.slice(3)).toEqual([
      'delete ns/vanish (relist)',
      'update ns/change@12->14 (relist)',
      'add ns/new@15',
    ]);
    expect(api.lists()).toHaveLength(2);
    expect(api.lastWatch().req.query?.resourceVersion).toBe('15');
    expect(informer.keys().sort()).toEqual(['ns/change', 'ns/keep', 'ns/new']);
  });

  it('does not relist in a hot loop when every watch answers 410', async () => {
    const { api, informer, clock } = setup();
    api.overrides.push((req) => (req.query?.watch ? json(410, statusBody(410, 'Expired')) : undefined));
    informer.start();
    await informer.waitForSync();
    await flush(20);
    // The first 410 relists at once; the relist alone is not proof of health, so the next one waits.
    expect(api.lists()).toHaveLength(2);
    for (const expected of [3, 4, 5]) {
      await clock.advanceAsync(clock.nextDueAt()! - clock.now());
      await flush();
      expect(api.lists()).toHaveLength(expected);
    }
    const at = api.requests.filter((r) => r.req.query?.watch === undefined).map((r) => r.at);
    expect(at.slice(1).map((t, i) => t - (at[i] as number))).toEqual([0, 2000, 4000, 8000]);
  });

  it('relists when the watch request itself answers HTTP 410', async () => {
    const { api, informer, clock } = setup();
    informer.start();
    await informer.waitForSync();
    await flush();
    let gone = 1;
    api.overrides.push((req) =>
      req.query?.watch && gone-- > 0 ? json(410, statusBody(410, 'Expired')) : undefined,
    );
    api.lastWatch().fail(new Error('connection reset'));
    await flush();
    await clock.advanceAsync(1000); // 1st failure: re-watch after ~1 s, answered 410
    await flush();
    expect(api.watches).toHaveLength(1);
    expect(api.lists()).toHaveLength(1);
    await clock.advanceAsync(2000); // 2nd consecutive failure: relist after ~2 s
    await flush(20);
    expect(api.lists()).toHaveLength(2);
    expect(api.watches).toHaveLength(2);
  });

  it('restarts after errors with growing jittered delays capped at 30 s, and resets after a success', async () => {
    const { api, informer, clock } = setup();
    let failures = 7;
    api.overrides.push((req) =>
      req.query?.watch === undefined && failures-- > 0
        ? json(500, statusBody(500, 'InternalError'))
        : undefined,
    );
    informer.start();
    await flush();
    for (let i = 0; i < 8; i++) await clock.advanceAsync(30_000);
    await informer.waitForSync();
    const at = api
      .lists()
      .map((_, i) => api.requests.filter((r) => r.req.query?.watch === undefined)[i]?.at ?? 0);
    const gaps = at.slice(1).map((t, i) => t - (at[i] as number));
    expect(gaps).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);

    // Once data flows on the watch, the next failure starts again at 1 s.
    await flush();
    api.lastWatch().send('BOOKMARK', { metadata: { resourceVersion: '10' } });
    await flush();
    const before = clock.now();
    api.lastWatch().fail(new Error('socket hang up'));
    await flush();
    await clock.advanceAsync(999);
    expect(api.watches).toHaveLength(1);
    await clock.advanceAsync(1);
    await flush();
    expect(api.watches).toHaveLength(2);
    expect(api.lastWatch().at - before).toBe(1000);
    expect(api.lastWatch().req.query?.resourceVersion).toBe('10'); // resumed, not relisted
    expect(api.lists()).toHaveLength(8);
  });

  it('waits at least the Retry-After of a 429', async () => {
    const { api, informer, clock } = setup();
    let once = true;
    api.overrides.push((req) => {
      if (req.query?.watch === undefined && once) {
        once = false;
        return json(429, statusBody(429, 'TooManyRequests', 7));
      }
      return undefined;
    });
    informer.start();
    await flush();
    await clock.advanceAsync(6999);
    expect(informer.hasSynced()).toBe(false);
    await clock.advanceAsync(1);
    await informer.waitForSync();
  });

  it('replaces a silent watch after the inactivity timeout, resuming from the last resourceVersion', async () => {
    const registry = new Registry();
    const { api, informer, clock, events } = setup({ inactivityTimeoutMs: 60_000, registry });
    informer.start();
    await informer.waitForSync();
    await flush();
    const first = api.lastWatch();
    // Data resets the timer: a bookmark at 30 s keeps the stream until 90 s.
    await clock.advanceAsync(30_000);
    first.send('BOOKMARK', { metadata: { resourceVersion: '30' } });
    await flush();
    await clock.advanceAsync(59_999);
    expect(first.closed).toBe(false);
    await clock.advanceAsync(1);
    await flush();
    expect(first.closed).toBe(true); // aborted by us
    await clock.advanceAsync(1000); // first failure: ~1 s backoff
    await flush();
    expect(api.watches).toHaveLength(2);
    expect(api.lastWatch().req.query?.resourceVersion).toBe('30');
    api.lastWatch().send('ADDED', obj('late', '31'));
    await flush();
    expect(events).toEqual(['add ns/late@31']);
    expect(await registry.getSingleMetricAsString('berth_informer_watch_restarts_total')).toContain(
      'berth_informer_watch_restarts_total{informer="pods",reason="inactivity"} 1',
    );
  });

  it('resumes at once after a healthy watch ends, but backs off when watches close immediately', async () => {
    const { api, informer, clock } = setup();
    informer.start();
    await informer.waitForSync();
    await flush();
    await clock.advanceAsync(5000);
    api.lastWatch().close(); // healthy (lasted 5 s): server timeout
    await flush();
    expect(api.watches).toHaveLength(2);
    api.lastWatch().close(); // 0 ms, no events: very short watch
    await flush();
    expect(api.watches).toHaveLength(2);
    await clock.advanceAsync(1000);
    await flush();
    expect(api.watches).toHaveLength(3);
    api.lastWatch().close();
    await flush();
    await clock.advanceAsync(1999);
    await flush();
    expect(api.watches).toHaveLength(3);
    await clock.advanceAsync(1);
    await flush();
    expect(api.watches).toHaveLength(4);
  });

  it('bounds a list that never answers with the request timeout', async () => {
    const { api, informer, clock } = setup({ requestTimeoutMs: 5000 });
    let hang = true;
    api.overrides.push((req) => {
      if (!hang || req.query?.watch !== undefined) return undefined;
      hang = false;
      return {
        status: 200,
        headers: {},
        stream: () => null,
        text: () =>
          new Promise<string>((_, reject) =>
            req.signal?.addEventListener('abort', () => reject(new Error('aborted'))),
          ),
      };
    });
    informer.start();
    await flush();
    await clock.advanceAsync(5000);
    await flush();
    await clock.advanceAsync(1000);
    await informer.waitForSync();
    expect(api.lists()).toHaveLength(2);
  });

  it('keeps going when handlers throw or reject, without unhandled rejections', async () => {
    const registry = new Registry();
    const { api, informer, events } = setup({ registry });
    informer.addEventHandler({
      onAdd: () => {
        throw new Error('sync boom');
      },
      onUpdate: async () => {
        throw new Error('async boom');
      },
    });
    informer.start();
    await informer.waitForSync();
    await flush();
    api.lastWatch().send('ADDED', obj('a', '11'));
    api.lastWatch().send('MODIFIED', obj('a', '12'));
    api.lastWatch().send('ADDED', obj('b', '13'));
    await flush();
    expect(events).toEqual(['add ns/a@11', 'update ns/a@11->12', 'add ns/b@13']);
    expect(informer.lastResourceVersion()).toBe('13');
    expect(await registry.getSingleMetricAsString('berth_informer_handler_errors_total')).toContain(
      'berth_informer_handler_errors_total{informer="pods"} 3',
    );
  });

  it('replays cached objects as adds to handlers registered after sync', async () => {
    const { api, informer } = setup();
    api.put(obj('a', ''));
    api.put(obj('b', ''));
    informer.start();
    await informer.waitForSync();
    const late: string[] = [];
    const remove = informer.addEventHandler({ onAdd: (o) => void late.push(objectKey(o)) });
    expect(late.sort()).toEqual(['ns/a', 'ns/b']);
    remove();
    await flush();
    api.lastWatch().send('ADDED', obj('c', '20'));
    await flush();
    expect(late).toHaveLength(2);
  });

  it('applies the transform (default strips managedFields; null keeps objects whole)', async () => {
    const a = setup();
    a.api.put(obj('a', '', { metadata: { name: 'a', namespace: 'ns', managedFields: [{ manager: 'm' }] } }));
    a.informer.start();
    await a.informer.waitForSync();
    expect(a.informer.get('ns/a')?.metadata?.managedFields).toBeUndefined();

    const b = setup({ transform: null });
    b.api.put(obj('a', '', { metadata: { name: 'a', namespace: 'ns', managedFields: [{ manager: 'm' }] } }));
    b.informer.start();
    await b.informer.waitForSync();
    expect(b.informer.get('ns/a')?.metadata?.managedFields).toHaveLength(1);
  });

  it('waitForSync rejects on abort and when the informer stops before syncing', async () => {
    const { api, informer } = setup();
    api.overrides.push(() => json(500, statusBody(500, 'InternalError')));
    const ac = new AbortController();
    const aborted = informer.waitForSync(ac.signal);
    ac.abort(new Error('gave up'));
    await expect(aborted).rejects.toThrow('gave up');
    informer.start();
    const pending = informer.waitForSync();
    await informer.stop();
    await expect(pending).rejects.toThrow(/stopped/);
    expect(informer.isRunning()).toBe(false);
  });

  it('exports seconds since the last event, computed at scrape time', async () => {
    const registry = new Registry();
    const { api, informer, clock } = setup({ registry });
    informer.start();
    await informer.waitForSync();
    await flush();
    await clock.advanceAsync(42_000);
    expect(await registry.getSingleMetricAsString('berth_informer_last_event_seconds')).toContain(
      'berth_informer_last_event_seconds{informer="pods"} 42',
    );
    api.lastWatch().send('BOOKMARK', { metadata: { resourceVersion: '11' } });
    await flush();
    expect(await registry.getSingleMetricAsString('berth_informer_last_event_seconds')).toContain(
      'berth_informer_last_event_seconds{informer="pods"} 0',
    );
    await informer.stop();
    expect(await registry.getSingleMetricAsString('berth_informer_last_event_seconds')).not.toContain('pods');
  });

  it('stops promptly when stopped while the list is being applied (no watch left running)', async () => {
    const { api, informer, clock } = setup();
    api.put(obj('a', '0'));
    // A handler (or anything running synchronously with the list's completion) stops the informer.
    let stopping: Promise<void> | undefined;
    informer.addEventHandler({
      onAdd: () => {
        stopping ??= informer.stop();
      },
    });
    informer.start();
    await flush();
    expect(stopping).toBeDefined();
    let stopped = false;
    void stopping?.then(() => {
      stopped = true;
    });
    await flush();
    expect(stopped).toBe(true);
    expect(api.watches.every((w) => w.closed)).toBe(true);
    expect(clock.pending()).toBe(0);
  });

  it('stops promptly: the open watch is aborted and no timer is left behind', async () => {
    const { api, informer, clock } = setup();
    informer.start();
    await informer.waitForSync();
    await flush();
    await informer.stop();
    expect(api.lastWatch().closed).toBe(true);
    expect(clock.pending()).toBe(0);
  });
});
