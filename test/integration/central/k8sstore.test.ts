// The Kubernetes lease store against the real API server (its Lease validation, resourceVersion
// conflicts, MicroTime precision; faults through ApiProxy): the store conformance suite, the Go server's
// object layout as kubectl sees it, serving objects the Go server wrote, the migration of legacy
// `berth-<sha256>` objects (replicas racing on it), keys too long for an object name, metadata-only
// conflict retries, fail-closed foreign objects, client-side throttling and /readyz.
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LeaseObject, leaseObjectName, legacyObjectName } from '../../../src/central/k8slease.ts';
import { K8sLeaseStore, METADATA_CONFLICT_ATTEMPTS } from '../../../src/central/k8sstore.ts';
import { LeaseManager } from '../../../src/central/manager.ts';
import type { LeaseRecord } from '../../../src/central/record.ts';
import { startCentralServer } from '../../../src/central/server.ts';
import { isStoreConflict } from '../../../src/central/store.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import {
  type KubeRequester,
  KubeTransport,
  type RawRequest,
  type RawResponse,
} from '../../../src/kube/transport.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
import { centralTls } from '../../helpers/central-tls.ts';
import { TestCluster } from '../../helpers/cluster.ts';
import { eventually } from '../../helpers/eventually.ts';
import { runStoreConformance } from '../../unit/central/store-conformance.ts';

let t: TestCluster;
let proxy: ApiProxy;
/** The admin, through the fault proxy: the stores' client. */
let kc: KubeConfig;
beforeAll(async () => {
  t = await TestCluster.shared();
  proxy = await ApiProxy.start(t);
  kc = t.kubeConfigFor(proxy.kubeconfigFor(t.kubeconfig));
});
afterAll(async () => {
  await proxy?.stop();
  await t?.stop();
});

const createNamespace = (): Promise<string> => t.namespace('coord');

const T0 = Date.UTC(2026, 8, 7, 9, 0, 0, 123);
// T0, T0 - 100 s and T0 - 60 s as the Go server writes MicroTime (microseconds; the store keeps ms).
const AT = '2026-09-07T09:00:00.123456Z';
const BEFORE = '2026-09-07T08:58:20.123456Z';
const LONG_AGO = '2026-09-07T08:59:00.123456Z';
const key = { namespace: 'pipeline', name: 'ingest' };
const record = (overrides: Partial<LeaseRecord> = {}): LeaseRecord => ({
  key,
  holder: 'cluster-east',
  ttlMs: 30_000,
  acquiredAt: T0,
  renewedAt: T0,
  fencingToken: 1,
  version: 0,
  ...overrides,
});

const quiet = createLogger({ level: 'silent' });

/** A managed Lease exactly as the Go 0.4.2 server creates one (holderIdentity always set, "" for a tombstone). */
function goLease(
  name: string,
  key: { namespace: string; name: string },
  spec: { holder: string; ttlSeconds?: number; acquired: string; renewed: string; token: number },
  version?: number,
): object {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name,
      labels: { 'berth.skaphos.io/managed-by': 'berth' },
      annotations: {
        'berth.skaphos.io/tenant-namespace': key.namespace,
        'berth.skaphos.io/lease-name': key.name,
        ...(version === undefined ? {} : { 'berth.skaphos.io/version': String(version) }),
      },
    },
    spec: {
      holderIdentity: spec.holder,
      ...(spec.ttlSeconds === undefined ? {} : { leaseDurationSeconds: spec.ttlSeconds }),
      acquireTime: spec.acquired,
      renewTime: spec.renewed,
      leaseTransitions: spec.token,
    },
  };
}

/** A Lease exactly as earlier versions of this store wrote one: `berth-<sha256>`, otherwise the same fields. */
function legacyLease(
  key: { namespace: string; name: string },
  spec: { holder: string; ttlSeconds?: number; renewed: string; token: number },
  version: number,
): object {
  const lease = goLease(legacyObjectName(key), key, { ...spec, acquired: spec.renewed }, version) as {
    spec: Record<string, unknown>;
  };
  if (spec.holder === '') delete lease.spec.holderIdentity;
  return lease;
}

async function kubectlCreate(namespace: string, ...objects: object[]): Promise<void> {
  for (const object of objects) {
    const created = await t.kubectl(['create', '-n', namespace, '-f', '-'], {
      input: JSON.stringify(object),
    });
    expect(created.code, created.stderr).toBe(0);
  }
}

async function kubectlGet(namespace: string, name: string): Promise<LeaseObject> {
  const got = await t.kubectl(['get', 'lease', '-n', namespace, name, '-o', 'json']);
  expect(got.code, got.stderr).toBe(0);
  return JSON.parse(got.stdout) as LeaseObject;
}

/** Names of the Leases in `namespace` (all, or those matching `selector`), sorted. */
async function leaseNames(namespace: string, selector?: string): Promise<string[]> {
  const args = ['get', 'leases', '-n', namespace, '-o', 'jsonpath={.items[*].metadata.name}'];
  const got = await t.kubectl(selector === undefined ? args : [...args, '-l', selector]);
  expect(got.code, got.stderr).toBe(0);
  return got.stdout.split(/\s+/).filter(Boolean).sort();
}

interface WireAnswer {
  status: number;
  body: { acquired?: boolean; holder?: string; fencingToken?: number; acquiredAt?: string; error?: string };
}

async function call(
  url: string,
  key: { namespace: string; name: string },
  op: 'acquire' | 'renew' | 'release',
  body: object,
): Promise<WireAnswer> {
  const res = await fetch(`${url}/v1alpha1/namespaces/${key.namespace}/leases/${key.name}/${op}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: res.status === 204 ? {} : ((await res.json()) as WireAnswer['body']) };
}

/** A transport whose chosen requests can be held at the door, to replay a race in a chosen order. */
class HoldableTransport implements KubeRequester {
  readonly #inner: KubeTransport;
  #held: Array<{ match: (req: RawRequest) => boolean; arrive: () => void; gate: Promise<void> }> = [];

  constructor(kubeConfig: KubeConfig) {
    this.#inner = new KubeTransport(kubeConfig);
  }

  /** Holds the next request matching `match`: `arrived` once it waits, `release` lets it through. */
  hold(match: (req: RawRequest) => boolean): { arrived: Promise<void>; release: () => void } {
    const arrived = Promise.withResolvers<void>();
    const gate = Promise.withResolvers<void>();
    this.#held.push({ match, arrive: arrived.resolve, gate: gate.promise });
    return { arrived: arrived.promise, release: () => gate.resolve() };
  }

  async request(req: RawRequest): Promise<RawResponse> {
    const i = this.#held.findIndex((h) => h.match(req));
    if (i >= 0) {
      const [hold] = this.#held.splice(i, 1);
      hold!.arrive();
      await hold!.gate;
    }
    return this.#inner.request(req);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}

runStoreConformance(
  'k8s',
  async () => {
    const namespace = await createNamespace();
    const open = async () => new K8sLeaseStore({ kc, namespace, qps: 0 });
    return { store: await open(), reopen: open };
  },
  { durable: true, apiKeysOnly: true },
);

describe('k8s lease store', () => {
  const stores: K8sLeaseStore[] = [];
  const open = (namespace: string, extra: Partial<ConstructorParameters<typeof K8sLeaseStore>[0]> = {}) => {
    const store = new K8sLeaseStore({ kc, namespace, qps: 0, ...extra });
    stores.push(store);
    return store;
  };
  afterAll(async () => {
    for (const s of stores) await s.close();
  });

  it('writes coordination.k8s.io/v1 Leases as the spec maps them, readable with kubectl', async () => {
    const namespace = await createNamespace();
    const manager = new LeaseManager({ store: open(namespace), clock: new ManualClock(T0) });
    const grant = await manager.acquire(key, 'cluster-east', 30_000);
    const name = 'pipeline.ingest';
    const got = await t.kubectl(['get', 'lease', '-n', namespace, name, '-o', 'json']);
    expect(got.stderr).toBe('');
    const lease = JSON.parse(got.stdout);
    expect(lease.metadata.labels).toEqual({ 'berth.skaphos.io/managed-by': 'berth' });
    expect(lease.metadata.annotations).toEqual({
      'berth.skaphos.io/tenant-namespace': 'pipeline',
      'berth.skaphos.io/lease-name': 'ingest',
      'berth.skaphos.io/version': '1',
    });
    expect(lease.spec).toEqual({
      holderIdentity: 'cluster-east',
      leaseDurationSeconds: 30,
      acquireTime: '2026-09-07T09:00:00.123000Z',
      renewTime: '2026-09-07T09:00:00.123000Z',
      leaseTransitions: 1,
    });
    await manager.release(key, 'cluster-east', grant.fencingToken);
    const tomb = JSON.parse((await t.kubectl(['get', 'lease', '-n', namespace, name, '-o', 'json'])).stdout);
    expect(tomb.spec).toEqual({
      acquireTime: '2026-09-07T09:00:00.123000Z',
      renewTime: '2026-09-07T09:00:00.123000Z',
      leaseTransitions: 1,
    });
    expect(tomb.metadata.annotations['berth.skaphos.io/version']).toBe('2');
    const listed = await t.kubectl([
      'get',
      'leases',
      '-n',
      namespace,
      '-l',
      'berth.skaphos.io/managed-by=berth',
      '-o',
      'name',
    ]);
    expect(listed.stdout.trim()).toBe(`lease.coordination.k8s.io/${name}`);
  });

  it('retries an update refused only because someone else touched the metadata, keeping their change', async () => {
    const namespace = await createNamespace();
    const store = open(namespace);
    await store.put(0, record());
    const seen = (await store.get(key))!;
    // A foreign metadata-only write between our read and our write (e.g. a label by a policy engine).
    const labelled = await t.kubectl([
      'label',
      'lease',
      '-n',
      namespace,
      leaseObjectName(key),
      'team=storage',
    ]);
    expect(labelled.code, labelled.stderr).toBe(0);
    const written = await store.put(seen.version, record({ renewedAt: T0 + 5_000 }));
    expect(written).toEqual(record({ renewedAt: T0 + 5_000, version: 2 }));
    const lease = JSON.parse(
      (await t.kubectl(['get', 'lease', '-n', namespace, leaseObjectName(key), '-o', 'json'])).stdout,
    );
    expect(lease.metadata.labels).toEqual({ 'berth.skaphos.io/managed-by': 'berth', team: 'storage' });
  });

  it('treats a write by another replica (the version moved) as a conflict, not a retry', async () => {
    const namespace = await createNamespace();
    const a = open(namespace);
    const b = open(namespace);
    await a.put(0, record());
    await a.get(key);
    await b.put(1, record({ holder: 'cluster-west' }));
    const err = await a.put(1, record({ renewedAt: T0 + 1 })).catch((e: unknown) => e);
    expect(isStoreConflict(err), String(err)).toBe(true);
    expect(String(err)).toContain('is at version 2, not 1');
    expect(await a.get(key)).toMatchObject({ holder: 'cluster-west', version: 2 });
  });

  it(`gives up after ${METADATA_CONFLICT_ATTEMPTS} conflicting updates`, async () => {
    const namespace = await createNamespace();
    const store = open(namespace);
    await store.put(0, record());
    const fault = proxy.inject({
      verbs: ['update'],
      resource: 'leases',
      namespace,
      status: 409,
      times: METADATA_CONFLICT_ATTEMPTS,
    });
    try {
      const err = await store.put(1, record({ renewedAt: T0 + 1 })).catch((e: unknown) => e);
      expect(isStoreConflict(err), String(err)).toBe(true);
      expect(String(err)).toContain('kept changing');
      expect(fault.hits()).toBe(METADATA_CONFLICT_ATTEMPTS);
    } finally {
      fault.remove();
    }
    expect((await store.put(1, record({ renewedAt: T0 + 2 }))).version).toBe(2);
  });

  it('rate-limits its requests on the client (qps/burst) and retries a 429 after Retry-After', async () => {
    const namespace = await createNamespace();
    const clock = new ManualClock();
    await open(namespace).put(0, record()); // so that each get below is one request
    const store = open(namespace, { qps: 2, burst: 1, clock });
    await store.get(key); // the burst
    let done = false;
    const throttled = store.get(key).then(() => {
      done = true;
    });
    expect(store.throttledMs).toBe(500);
    await clock.advanceAsync(499);
    expect(done).toBe(false);
    await clock.advanceAsync(1);
    await throttled;

    const fault = proxy.inject({
      verbs: ['get'],
      resource: 'leases',
      namespace,
      status: 429,
      retryAfterSeconds: 2,
      times: 1,
    });
    const unthrottled = open(namespace, { qps: 0, clock });
    let answered = false;
    const retried = unthrottled.get(key).then((r) => {
      answered = true;
      return r;
    });
    await eventually(() => fault.hits() === 1);
    await clock.advanceAsync(1_999);
    expect(answered).toBe(false);
    await clock.advanceAsync(1);
    expect(await retried).toEqual(record({ version: 1 }));
  });

  it('serves /readyz from a List of the coordination namespace', async () => {
    const namespace = await createNamespace();
    const server = await startCentralServer({
      tls: await centralTls(),
      store: open(namespace),
      logger: quiet,
      gc: false,
      readiness: { ttlMs: 0 },
    });
    try {
      const ready = async () => (await fetch(`${server.url}/readyz`)).status;
      expect(await ready()).toBe(200);
      const fault = proxy.inject({ verbs: ['list'], resource: 'leases', namespace, status: 503 });
      await eventually(async () => (await ready()) === 503);
      fault.remove();
      await eventually(async () => (await ready()) === 200);
    } finally {
      await server.stop();
    }
  });
});

describe('k8s lease store: interchangeable with the Go server', () => {
  const stores: K8sLeaseStore[] = [];
  const transports: HoldableTransport[] = [];
  const open = (namespace: string) => {
    const store = new K8sLeaseStore({ kc, namespace, qps: 0 });
    stores.push(store);
    return store;
  };
  const openHoldable = (namespace: string) => {
    const transport = new HoldableTransport(kc);
    transports.push(transport);
    const store = new K8sLeaseStore({ transport, namespace, qps: 0 });
    stores.push(store);
    return { store, transport };
  };
  afterAll(async () => {
    for (const s of stores) await s.close();
    for (const tr of transports) await tr.close();
  });

  it('serves the leases a Go server wrote under <ns>.<name>, keeping holders and tokens', async () => {
    const namespace = await createNamespace();
    const held = { namespace: 'pipeline', name: 'held' };
    const expired = { namespace: 'pipeline', name: 'expired' };
    const released = { namespace: 'pipeline', name: 'released' };
    await kubectlCreate(
      namespace,
      goLease(
        'pipeline.held',
        held,
        { holder: 'cluster-east', ttlSeconds: 30, acquired: BEFORE, renewed: AT, token: 41 },
        77,
      ),
      // Written before the Go server had the version annotation.
      goLease('pipeline.expired', expired, {
        holder: 'cluster-east',
        ttlSeconds: 10,
        acquired: LONG_AGO,
        renewed: LONG_AGO,
        token: 12,
      }),
      goLease('pipeline.released', released, { holder: '', acquired: BEFORE, renewed: AT, token: 5 }, 3),
    );
    const server = await startCentralServer({
      tls: await centralTls(),
      store: open(namespace),
      clock: new ManualClock(T0 + 5_000),
      logger: quiet,
      gc: false,
    });
    try {
      const east = await call(server.url, held, 'acquire', { holder: 'cluster-east', ttlSeconds: 30 });
      expect(east).toMatchObject({ status: 200, body: { acquired: true, fencingToken: 41 } });
      expect(Date.parse(east.body.acquiredAt!)).toBe(T0 - 100_000);
      expect(
        await call(server.url, held, 'acquire', { holder: 'cluster-west', ttlSeconds: 30 }),
      ).toMatchObject({
        status: 200,
        body: { acquired: false, holder: 'cluster-east', fencingToken: 41 },
      });
      expect(
        await call(server.url, held, 'renew', { holder: 'cluster-east', fencingToken: 41, ttlSeconds: 30 }),
      ).toMatchObject({ status: 200, body: { acquired: true, fencingToken: 41 } });
      expect(
        await call(server.url, expired, 'acquire', { holder: 'cluster-west', ttlSeconds: 30 }),
      ).toMatchObject({
        status: 200,
        body: { acquired: true, holder: 'cluster-west', fencingToken: 13 },
      });
      expect(
        await call(server.url, released, 'acquire', { holder: 'cluster-west', ttlSeconds: 30 }),
      ).toMatchObject({
        status: 200,
        body: { acquired: true, fencingToken: 6 },
      });

      // Still the Go layout, versions moved on from the Go server's, nothing else created.
      expect(await leaseNames(namespace)).toEqual(['pipeline.expired', 'pipeline.held', 'pipeline.released']);
      const heldNow = await kubectlGet(namespace, 'pipeline.held');
      expect(heldNow.metadata.annotations).toMatchObject({ 'berth.skaphos.io/version': '79' });
      expect(heldNow.spec).toMatchObject({ holderIdentity: 'cluster-east', leaseTransitions: 41 });
      const expiredNow = await kubectlGet(namespace, 'pipeline.expired');
      expect(expiredNow.metadata.annotations).toMatchObject({ 'berth.skaphos.io/version': '2' });
      expect(expiredNow.spec).toMatchObject({ holderIdentity: 'cluster-west', leaseTransitions: 13 });

      // A Go replica beside ours takes the lease over (as its Put would write it): ours follows.
      const patched = await t.kubectl([
        'patch',
        'lease',
        '-n',
        namespace,
        'pipeline.held',
        '--type=merge',
        '-p',
        JSON.stringify({
          metadata: { annotations: { 'berth.skaphos.io/version': '80' } },
          spec: { holderIdentity: 'cluster-south', leaseTransitions: 42 },
        }),
      ]);
      expect(patched.code, patched.stderr).toBe(0);
      expect(
        await call(server.url, held, 'renew', { holder: 'cluster-east', fencingToken: 41, ttlSeconds: 30 }),
      ).toMatchObject({ status: 200, body: { acquired: false, holder: 'cluster-south', fencingToken: 42 } });
    } finally {
      await server.stop();
    }
  });

  it('migrates a legacy object on first read: record, token and version move to <ns>.<name>, the old one is sealed', async () => {
    const namespace = await createNamespace();
    await kubectlCreate(
      namespace,
      legacyLease(key, { holder: 'cluster-east', ttlSeconds: 30, renewed: AT, token: 9 }, 6),
    );
    const store = open(namespace);
    const clock = new ManualClock(T0 + 5_000);
    const manager = new LeaseManager({ store, clock });
    expect(await manager.acquire(key, 'cluster-east', 30_000)).toMatchObject({
      acquired: true,
      fencingToken: 9,
    });

    const moved = await kubectlGet(namespace, 'pipeline.ingest');
    expect(moved.metadata.labels).toEqual({ 'berth.skaphos.io/managed-by': 'berth' });
    expect(moved.metadata.annotations).toEqual({
      'berth.skaphos.io/tenant-namespace': 'pipeline',
      'berth.skaphos.io/lease-name': 'ingest',
      'berth.skaphos.io/version': '7', // 6 carried, then the renewal
    });
    expect(moved.spec).toMatchObject({ holderIdentity: 'cluster-east', leaseTransitions: 9 });
    const sealed = await kubectlGet(namespace, legacyObjectName(key));
    expect(sealed.metadata.labels).toEqual({ 'berth.skaphos.io/managed-by': 'berth-migrated' });
    expect(sealed.metadata.annotations).toMatchObject({
      'berth.skaphos.io/migrated-to': 'pipeline.ingest',
      'berth.skaphos.io/version': '6',
    });
    expect(sealed.spec).toMatchObject({ holderIdentity: 'cluster-east', leaseTransitions: 9 });

    await clock.advanceAsync(60_000);
    expect(await manager.acquire(key, 'cluster-west', 30_000)).toMatchObject({
      acquired: true,
      fencingToken: 10,
    });
    expect(await store.list()).toEqual([
      expect.objectContaining({ key, holder: 'cluster-west', fencingToken: 10 }),
    ]);
    // What a Go server lists: the new object only.
    expect(await leaseNames(namespace, 'berth.skaphos.io/managed-by=berth')).toEqual(['pipeline.ingest']);
  });

  it('refuses to create a key whose record is still in a legacy object, migrating it instead', async () => {
    const namespace = await createNamespace();
    await kubectlCreate(namespace, legacyLease(key, { holder: '', renewed: AT, token: 9 }, 6));
    const store = open(namespace);
    const err = await store.put(0, record()).catch((e: unknown) => e);
    expect(isStoreConflict(err), String(err)).toBe(true);
    expect(String(err)).toContain(`pipeline/ingest already exists (in ${legacyObjectName(key)})`);
    expect(await store.get(key)).toMatchObject({ holder: '', fencingToken: 9, version: 6 });
    expect(await leaseNames(namespace, 'berth.skaphos.io/managed-by=berth')).toEqual(['pipeline.ingest']);
  });

  it('migrates every legacy object on List, tombstones included, and reports each key once', async () => {
    const namespace = await createNamespace();
    const a = { namespace: 'pipeline', name: 'a' };
    const b = { namespace: 'pipeline', name: 'b' };
    const c = { namespace: 'pipeline', name: 'c' };
    await kubectlCreate(
      namespace,
      legacyLease(a, { holder: '', renewed: AT, token: 3 }, 4),
      legacyLease(b, { holder: 'cluster-east', ttlSeconds: 30, renewed: AT, token: 4 }, 2),
      // c: a migration interrupted between the copy and the seal; the copy has moved on since.
      legacyLease(c, { holder: 'cluster-east', ttlSeconds: 30, renewed: AT, token: 7 }, 5),
      goLease(
        'pipeline.c',
        c,
        { holder: 'cluster-west', ttlSeconds: 30, acquired: AT, renewed: AT, token: 8 },
        6,
      ),
    );
    const listed = await open(namespace).list();
    const byName = Object.fromEntries(listed.map((r) => [r.key.name, r]));
    expect(listed).toHaveLength(3);
    expect(byName.a).toMatchObject({ holder: '', fencingToken: 3, version: 4 });
    expect(byName.b).toMatchObject({ holder: 'cluster-east', fencingToken: 4, version: 2 });
    expect(byName.c).toMatchObject({ holder: 'cluster-west', fencingToken: 8, version: 6 });
    expect(await leaseNames(namespace, 'berth.skaphos.io/managed-by=berth')).toEqual([
      'pipeline.a',
      'pipeline.b',
      'pipeline.c',
    ]);
    expect(await leaseNames(namespace, 'berth.skaphos.io/managed-by=berth-migrated')).toEqual(
      [a, b, c].map(legacyObjectName).sort(),
    );
    expect((await kubectlGet(namespace, 'pipeline.c')).spec).toMatchObject({ leaseTransitions: 8 });
    // A second sweep (another replica's) finds nothing left to do.
    expect(await open(namespace).list()).toHaveLength(3);
  });

  it('two replicas racing a migration create one object and seal once (one create held until the other is done)', async () => {
    const namespace = await createNamespace();
    await kubectlCreate(
      namespace,
      legacyLease(key, { holder: 'cluster-east', ttlSeconds: 30, renewed: AT, token: 9 }, 6),
    );
    const a = openHoldable(namespace);
    const b = open(namespace);
    // a has read both names (no new object, a live legacy one) and is about to create.
    const create = a.transport.hold((req) => req.method === 'POST');
    const aGet = a.store.get(key);
    await create.arrived;
    const bRecord = await b.get(key);
    expect(bRecord).toMatchObject({ holder: 'cluster-east', fencingToken: 9, version: 6 });
    create.release();
    expect(await aGet).toEqual(bRecord);
    const moved = await kubectlGet(namespace, 'pipeline.ingest');
    expect(moved.metadata.annotations!['berth.skaphos.io/version']).toBe('6');
    expect((await kubectlGet(namespace, legacyObjectName(key))).metadata.labels).toEqual({
      'berth.skaphos.io/managed-by': 'berth-migrated',
    });
    const creates = proxy.records.filter((r) => r.namespace === namespace && r.verb === 'create');
    expect(creates.map((r) => r.status).sort()).toEqual([201, 409]);
    expect(await a.store.list()).toHaveLength(1);
  });

  it('a replica that finds the legacy object sealed under it reads the migrated record, not an absent one', async () => {
    const namespace = await createNamespace();
    await kubectlCreate(
      namespace,
      legacyLease(key, { holder: 'cluster-east', ttlSeconds: 30, renewed: AT, token: 9 }, 6),
    );
    const a = openHoldable(namespace);
    const b = open(namespace);
    // a has found no new object and is about to read the legacy one; b migrates meanwhile.
    const legacyRead = a.transport.hold((req) => req.path.endsWith(`/${legacyObjectName(key)}`));
    const renewed = new LeaseManager({ store: a.store, clock: new ManualClock(T0 + 5_000) }).renew(
      key,
      'cluster-east',
      9,
      30_000,
    );
    await legacyRead.arrived;
    expect(await b.get(key)).toMatchObject({ fencingToken: 9, version: 6 });
    legacyRead.release();
    expect(await renewed).toMatchObject({ acquired: true, holder: 'cluster-east', fencingToken: 9 });
    expect((await kubectlGet(namespace, 'pipeline.ingest')).metadata.annotations).toMatchObject({
      'berth.skaphos.io/version': '7',
    });
  });

  it('finishes a migration whose seal failed: the copy serves at once, the next List seals', async () => {
    const namespace = await createNamespace();
    await kubectlCreate(
      namespace,
      legacyLease(key, { holder: 'cluster-east', ttlSeconds: 30, renewed: AT, token: 9 }, 6),
    );
    const fault = proxy.inject({
      verbs: ['update'],
      resource: 'leases',
      namespace,
      name: legacyObjectName(key),
      status: 500,
      times: 1,
    });
    try {
      await expect(open(namespace).get(key)).rejects.toThrow();
      expect(fault.hits()).toBe(1);
    } finally {
      fault.remove();
    }
    expect(await leaseNames(namespace, 'berth.skaphos.io/managed-by=berth')).toEqual(
      [legacyObjectName(key), 'pipeline.ingest'].sort(),
    );
    const other = open(namespace);
    expect(await other.get(key)).toMatchObject({ fencingToken: 9, version: 6 });
    expect(await other.list()).toEqual([expect.objectContaining({ key, fencingToken: 9, version: 6 })]);
    expect(await leaseNames(namespace, 'berth.skaphos.io/managed-by=berth')).toEqual(['pipeline.ingest']);
    expect((await kubectlGet(namespace, legacyObjectName(key))).metadata.annotations).toMatchObject({
      'berth.skaphos.io/migrated-to': 'pipeline.ingest',
    });
  });

  it('replicas acquiring expired legacy leases at once: one holder per key at the next token, every legacy object sealed', async () => {
    const namespace = await createNamespace();
    const keys = Array.from({ length: 6 }, (_, i) => ({ namespace: 'pipeline', name: `lease-${i}` }));
    await kubectlCreate(
      namespace,
      ...keys.map((k, i) =>
        legacyLease(k, { holder: 'gone', ttlSeconds: 10, renewed: LONG_AGO, token: 20 + i }, 3),
      ),
    );
    const clock = new ManualClock(T0);
    const replicas = ['r0', 'r1', 'r2'].map((holder) => ({
      holder,
      manager: new LeaseManager({ store: open(namespace), clock }),
    }));
    const results = await Promise.all(
      keys.flatMap((k) =>
        replicas.map(async (r) => ({
          key: k.name,
          holder: r.holder,
          result: await r.manager.acquire(k, r.holder, 30_000),
        })),
      ),
    );
    for (const [i, k] of keys.entries()) {
      const forKey = results.filter((r) => r.key === k.name);
      const winners = forKey.filter((r) => r.result.acquired);
      expect(winners, k.name).toHaveLength(1);
      const winner = winners[0]!;
      expect(winner.result.fencingToken).toBe(21 + i);
      for (const r of forKey) expect(r.result).toMatchObject({ holder: winner.holder, fencingToken: 21 + i });
      const lease = await kubectlGet(namespace, `pipeline.${k.name}`);
      expect(lease.spec).toMatchObject({ holderIdentity: winner.holder, leaseTransitions: 21 + i });
    }
    expect(await leaseNames(namespace, 'berth.skaphos.io/managed-by=berth')).toEqual(
      keys.map((k) => `pipeline.${k.name}`).sort(),
    );
    expect(await leaseNames(namespace, 'berth.skaphos.io/managed-by=berth-migrated')).toEqual(
      keys.map(legacyObjectName).sort(),
    );
    expect(await open(namespace).list()).toHaveLength(keys.length);
  });
});

describe('k8s lease store: keys and names', () => {
  const stores: K8sLeaseStore[] = [];
  const open = (namespace: string) => {
    const store = new K8sLeaseStore({ kc, namespace, qps: 0 });
    stores.push(store);
    return store;
  };
  afterAll(async () => {
    for (const s of stores) await s.close();
  });

  const longest = { namespace: 'x'.repeat(63), name: 'y'.repeat(189) };
  const tooLong = { namespace: 'x'.repeat(63), name: 'y'.repeat(190) };
  const limit = `invalid key ${tooLong.namespace}/${tooLong.name}: namespace and name joined with '.' must be at most 253 characters, got 254`;

  it('refuses a key too long for an object name: 400 from the API and an error from the store, naming the limit; nothing written', async () => {
    const namespace = await createNamespace();
    const store = open(namespace);
    const server = await startCentralServer({ tls: await centralTls(), store, logger: quiet, gc: false });
    try {
      expect(await call(server.url, tooLong, 'acquire', { holder: 'cluster-east', ttlSeconds: 30 })).toEqual({
        status: 400,
        body: { error: limit },
      });
      expect(
        await call(server.url, longest, 'acquire', { holder: 'cluster-east', ttlSeconds: 30 }),
      ).toMatchObject({
        status: 200,
        body: { acquired: true, fencingToken: 1 },
      });
    } finally {
      await server.stop();
    }
    const put = await store.put(0, record({ key: tooLong })).catch((e: unknown) => e);
    expect(isStoreConflict(put)).toBe(false);
    expect(String(put)).toBe(`Error: k8s lease store: ${limit}`);
    await expect(store.get(tooLong)).rejects.toThrow(limit);
    await expect(store.get({ namespace: 'a.b', name: 'c' })).rejects.toThrow(
      'k8s lease store: invalid namespace "a.b": must be an RFC 1123 DNS label',
    );
    expect(await leaseNames(namespace)).toEqual([`${'x'.repeat(63)}.${'y'.repeat(189)}`]);
  });

  it('fails closed on a foreign object under a key name, new or legacy, and leaves it alone', async () => {
    const namespace = await createNamespace();
    // Someone's own Lease (a leader election) under pipeline.ingest, and a Berth object claiming
    // another key under pipeline.other's name.
    await kubectlCreate(namespace, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'pipeline.ingest' },
      spec: { holderIdentity: 'controller-0', leaseDurationSeconds: 15 },
    });
    const other = { namespace: 'pipeline', name: 'other' };
    await kubectlCreate(
      namespace,
      goLease(
        'pipeline.other',
        key,
        {
          holder: 'x',
          ttlSeconds: 30,
          acquired: AT,
          renewed: AT,
          token: 1,
        },
        1,
      ),
    );
    const squatted = { namespace: 'pipeline', name: 'squatted' };
    await kubectlCreate(
      namespace,
      goLease(
        legacyObjectName(squatted),
        key,
        { holder: 'x', ttlSeconds: 30, acquired: AT, renewed: AT, token: 1 },
        1,
      ),
    );
    const store = open(namespace);
    await expect(store.get(key)).rejects.toThrow(
      'k8s lease store: lease pipeline.ingest is not labelled berth.skaphos.io/managed-by=berth',
    );
    expect(isStoreConflict(await store.put(0, record()).catch((e: unknown) => e))).toBe(true);
    await expect(store.put(1, record())).rejects.toThrow('is not labelled');
    // pipeline/ingest also has a legacy record, which cannot move to the occupied name.
    await kubectlCreate(namespace, legacyLease(key, { holder: '', renewed: AT, token: 9 }, 6));
    await expect(open(namespace).get(key)).rejects.toThrow('is not labelled');
    await expect(open(namespace).put(0, record())).rejects.toThrow('is not labelled');
    await expect(store.get(other)).rejects.toThrow(
      'k8s lease store: lease pipeline.other holds ["pipeline","ingest"], not ["pipeline","other"] (a foreign object on the name)',
    );
    await expect(store.get(squatted)).rejects.toThrow(
      `lease ${legacyObjectName(squatted)} holds ["pipeline","ingest"]`,
    );
    expect(await store.list()).toEqual([]);
    const server = await startCentralServer({ tls: await centralTls(), store, logger: quiet, gc: false });
    try {
      expect(
        await call(server.url, key, 'acquire', { holder: 'cluster-east', ttlSeconds: 30 }),
      ).toMatchObject({
        status: 500,
        body: { error: 'internal error' },
      });
    } finally {
      await server.stop();
    }
    const untouched = await kubectlGet(namespace, 'pipeline.ingest');
    expect(untouched.metadata.labels).toBeUndefined();
    expect(untouched.spec).toEqual({ holderIdentity: 'controller-0', leaseDurationSeconds: 15 });
    expect(await leaseNames(namespace)).toHaveLength(4);
    // The legacy record is kept, unsealed, for when the name is freed.
    expect((await kubectlGet(namespace, legacyObjectName(key))).metadata.labels).toEqual({
      'berth.skaphos.io/managed-by': 'berth',
    });
  });
});
