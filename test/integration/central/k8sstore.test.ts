// The Kubernetes lease store against the real API server (its Lease validation, resourceVersion
// conflicts, MicroTime precision; faults through ApiProxy): the store conformance suite, the object layout as kubectl sees it,
// metadata-only conflict retries, fail-closed name collisions, client-side throttling and /readyz.
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leaseObjectName } from '../../../src/central/k8slease.ts';
import { K8sLeaseStore, METADATA_CONFLICT_ATTEMPTS } from '../../../src/central/k8sstore.ts';
import { LeaseManager } from '../../../src/central/manager.ts';
import type { LeaseRecord } from '../../../src/central/record.ts';
import { startCentralServer } from '../../../src/central/server.ts';
import { isStoreConflict } from '../../../src/central/store.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { createLogger } from '../../../src/observability/logger.ts';
import { ApiProxy } from '../../helpers/api-proxy.ts';
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

runStoreConformance(
  'k8s',
  async () => {
    const namespace = await createNamespace();
    const open = async () => new K8sLeaseStore({ kc, namespace, qps: 0 });
    return { store: await open(), reopen: open };
  },
  { durable: true },
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
    const name = leaseObjectName(key);
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

  it('fails closed when two keys would share an object (a forced name collision)', async () => {
    const namespace = await createNamespace();
    const collide = () => 'berth-collision';
    const store = open(namespace, { objectName: collide });
    const other = { namespace: 'pipeline', name: 'other' };
    await store.put(0, record());
    await expect(store.get(other)).rejects.toThrow('object name collision');
    const created = await store.put(0, record({ key: other })).catch((e: unknown) => e);
    expect(isStoreConflict(created)).toBe(true);
    await expect(store.put(1, record({ key: other }))).rejects.toThrow('object name collision');
    expect(await store.get(key)).toMatchObject({ holder: 'cluster-east', version: 1 });
  });

  it('rate-limits its requests on the client (qps/burst) and retries a 429 after Retry-After', async () => {
    const namespace = await createNamespace();
    const clock = new ManualClock();
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
    expect(await retried).toBeUndefined();
  });

  it('serves /readyz from a List of the coordination namespace', async () => {
    const namespace = await createNamespace();
    const server = await startCentralServer({
      store: open(namespace),
      logger: createLogger({ level: 'silent' }),
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
