// Watch streams with kube-apiserver's semantics: replay from a resourceVersion (410 Gone once compacted),
// synthetic ADDED events for "" / "0" / sendInitialEvents, selector transitions (an object that stops
// matching is DELETED for that watcher), bookmarks and timeoutSeconds.
import type { ServerResponse } from 'node:http';
import type { Faults, WatchConnection } from './faults.ts';
import { apiVersionOf, type ResourceType, typeKey } from './registry.ts';
import { type FieldRequirement, matchesFields, matchesSelector, type Selector } from './selectors.ts';
import type { Change, Store } from './store.ts';
import { badRequest, type KubeObject, StatusError } from './types.ts';

export interface WatchRequest {
  type: ResourceType;
  namespace: string;
  labels: Selector;
  fields: FieldRequirement[];
  resourceVersion: string;
  resourceVersionMatch: string;
  allowBookmarks: boolean;
  sendInitialEvents: boolean;
  timeoutSeconds: number;
  bookmarkIntervalMs: number;
}

export function watchResourceVersion(rv: string): number | undefined {
  if (rv === '' || rv === '0') return undefined;
  if (!/^\d+$/.test(rv)) throw badRequest(`invalid resource version: "${rv}"`);
  return Number(rv);
}

export function serveWatch(res: ServerResponse, store: Store, faults: Faults, req: WatchRequest): void {
  const tk = typeKey(req.type.group, req.type.resource);
  const ns = req.type.namespaced ? req.namespace : '';
  const matches = (o: KubeObject | undefined): boolean =>
    o !== undefined &&
    (!ns || o.metadata.namespace === ns) &&
    matchesSelector(req.labels, o.metadata.labels) &&
    matchesFields(req.fields, o);

  const from = watchResourceVersion(req.resourceVersion);
  if (req.sendInitialEvents && req.resourceVersionMatch !== 'NotOlderThan') {
    throw new StatusError(
      422,
      'Invalid',
      'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan',
    );
  }
  const replay = from !== undefined && !req.sendInitialEvents ? store.changesSince(from, tk) : [];

  res.writeHead(200, {
    'Content-Type': 'application/json',
    'Cache-Control': 'no-cache, private',
    'Transfer-Encoding': 'chunked',
  });
  // Clients wait for the response headers before they consider the watch open, even when no event comes.
  res.flushHeaders();
  const write = (type: string, object: unknown): void => {
    if (conn.silent || res.writableEnded) return;
    res.write(`${JSON.stringify({ type, object })}\n`);
  };
  const bookmark = (extra?: Record<string, string>): void =>
    write('BOOKMARK', {
      kind: req.type.kind,
      apiVersion: apiVersionOf(req.type),
      metadata: { resourceVersion: String(store.currentRv()), ...(extra ? { annotations: extra } : {}) },
    });

  let unsubscribe = (): void => {};
  const timers: NodeJS.Timeout[] = [];
  const conn: WatchConnection = {
    group: req.type.group,
    resource: req.type.resource,
    namespace: ns,
    silent: false,
    drop: () => res.socket?.destroy(),
  };
  const close = (): void => {
    unsubscribe();
    for (const t of timers) clearTimeout(t);
    faults.watches.delete(conn);
    if (!res.writableEnded) res.end();
  };
  res.on('close', close);
  faults.watches.add(conn);

  if (replay === 'expired') {
    write(
      'ERROR',
      new StatusError(
        410,
        'Expired',
        `too old resource version: ${from} (${store.oldestRetainedRv()})`,
      ).toStatus(),
    );
    close();
    return;
  }

  if (from === undefined || req.sendInitialEvents) {
    for (const obj of store.list(tk, ns || undefined)) if (matches(obj)) write('ADDED', obj);
    if (req.sendInitialEvents) bookmark({ 'k8s.io/initial-events-end': 'true' });
  } else {
    for (const change of replay) deliver(change);
  }

  function deliver(change: Change): void {
    const now = matches(change.object);
    const before = change.type === 'MODIFIED' && matches(change.previous);
    if (change.type === 'ADDED') {
      if (now) write('ADDED', change.object);
    } else if (change.type === 'DELETED') {
      if (matches(change.previous) || now) write('DELETED', change.object);
    } else if (now && before) write('MODIFIED', change.object);
    else if (now) write('ADDED', change.object);
    else if (before) write('DELETED', change.object);
  }

  unsubscribe = store.subscribe((change) => {
    if (change.typeKey === tk) deliver(change);
  });

  if (req.allowBookmarks) {
    const tick = (): void => {
      bookmark();
      timers[0] = setTimeout(tick, req.bookmarkIntervalMs);
    };
    timers[0] = setTimeout(tick, req.bookmarkIntervalMs);
  }
  timers.push(
    setTimeout(() => {
      if (req.allowBookmarks) bookmark();
      close();
    }, req.timeoutSeconds * 1000),
  );
}
