// Watch semantics through client-node's Watch: replay from a resourceVersion, selector transitions,
// bookmarks, 410 Gone after compaction, and dropped connections.
import { CoreV1Api, PatchStrategy, setHeaderOptions, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../helpers/eventually.ts';
import { startTestSandbox, type TestSandbox } from '../../helpers/sandbox.ts';

let t: TestSandbox;
let core: CoreV1Api;

beforeAll(async () => {
  t = await startTestSandbox({ bookmarkIntervalMs: 100 });
  core = t.kc.makeApiClient(CoreV1Api);
});
afterAll(async () => {
  await t.stop();
});

interface Seen {
  type: string;
  name: string | undefined;
  rv: string | undefined;
  code?: number;
}

async function watchInto(
  path: string,
  query: Record<string, string | number | boolean | undefined>,
): Promise<{ events: Seen[]; done: Promise<unknown>; abort(): void }> {
  const events: Seen[] = [];
  let finish: (err: unknown) => void = () => {};
  const done = new Promise((resolve) => {
    finish = resolve;
  });
  const controller = await new Watch(t.kc).watch(
    path,
    query,
    (type, obj: { metadata?: { name?: string; resourceVersion?: string }; code?: number }) => {
      events.push({ type, name: obj.metadata?.name, rv: obj.metadata?.resourceVersion, code: obj.code });
    },
    (err) => finish(err ?? null),
  );
  return { events, done, abort: () => controller.abort() };
}

describe('watch', () => {
  it('replays changes after a resourceVersion and then streams live ones', async () => {
    await core.createNamespace({ body: { metadata: { name: 'w1' } } });
    const first = await core.createNamespacedConfigMap({
      namespace: 'w1',
      body: { metadata: { name: 'a' } },
    });
    await core.createNamespacedConfigMap({ namespace: 'w1', body: { metadata: { name: 'b' } } });
    const w = await watchInto('/api/v1/namespaces/w1/configmaps', {
      resourceVersion: first.metadata!.resourceVersion,
    });
    await core.deleteNamespacedConfigMap({ namespace: 'w1', name: 'a' });
    await eventually(() => w.events.length >= 2);
    expect(w.events.map((e) => `${e.type}:${e.name}`)).toEqual(['ADDED:b', 'DELETED:a']);
    w.abort();
  });

  it('sends synthetic ADDED events when watching without a resourceVersion', async () => {
    await core.createNamespace({ body: { metadata: { name: 'w2' } } });
    await core.createNamespacedConfigMap({ namespace: 'w2', body: { metadata: { name: 'x' } } });
    const w = await watchInto('/api/v1/namespaces/w2/configmaps', {});
    await eventually(() => w.events.some((e) => e.type === 'ADDED' && e.name === 'x'));
    w.abort();
  });

  it('turns selector transitions into ADDED and DELETED for the watcher', async () => {
    await core.createNamespace({ body: { metadata: { name: 'w3' } } });
    const cm = await core.createNamespacedConfigMap({
      namespace: 'w3',
      body: { metadata: { name: 'm', labels: { on: 'no' } } },
    });
    const w = await watchInto('/api/v1/namespaces/w3/configmaps', {
      resourceVersion: cm.metadata!.resourceVersion,
      labelSelector: 'on=yes',
    });
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    await core.patchNamespacedConfigMap(
      { namespace: 'w3', name: 'm', body: { metadata: { labels: { on: 'yes' } } } },
      merge,
    );
    await core.patchNamespacedConfigMap({ namespace: 'w3', name: 'm', body: { data: { k: 'v' } } }, merge);
    await core.patchNamespacedConfigMap(
      { namespace: 'w3', name: 'm', body: { metadata: { labels: { on: 'no' } } } },
      merge,
    );
    await eventually(() => w.events.length >= 3);
    expect(w.events.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'DELETED']);
    w.abort();
  });

  it('sends bookmarks when asked and ends at timeoutSeconds', async () => {
    const list = await core.listNamespacedConfigMap({ namespace: 'default' });
    const w = await watchInto('/api/v1/namespaces/default/configmaps', {
      resourceVersion: list.metadata!.resourceVersion,
      allowWatchBookmarks: true,
      timeoutSeconds: 1,
    });
    await eventually(() => w.events.some((e) => e.type === 'BOOKMARK' && Number(e.rv) > 0));
    await w.done;
  });

  it('answers 410 Gone for a resourceVersion older than the retained history', async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: 'default',
      body: { metadata: { name: 'old' } },
    });
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'newer' } } });
    t.sandbox.faults.compact();
    const w = await watchInto('/api/v1/namespaces/default/configmaps', {
      resourceVersion: cm.metadata!.resourceVersion,
    });
    await eventually(() => w.events.some((e) => e.type === 'ERROR' && e.code === 410));
    await w.done;
  });

  it('lets a test drop watch connections', async () => {
    await core.createNamespace({ body: { metadata: { name: 'w5' } } });
    const w = await watchInto('/api/v1/namespaces/w5/configmaps', {});
    await eventually(() => t.sandbox.faults.activeWatches({ resource: 'configmaps', namespace: 'w5' }) === 1);
    expect(t.sandbox.faults.dropWatches({ resource: 'configmaps', namespace: 'w5' })).toBe(1);
    await w.done;
    expect(t.sandbox.faults.activeWatches({ resource: 'configmaps', namespace: 'w5' })).toBe(0);
  });
});
