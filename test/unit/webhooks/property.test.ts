// Property-based tests (fast-check) over real TLS: thousands of malformed and adversarial reviews against
// the WorkloadAdmission server. The server never crashes, always answers a valid AdmissionReview (as the
// API server checks it) or a 4xx, and never allows a managed Pod without the scheduling gate or lets
// anyone but the operator lift it for an unregistered Pod.
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import type { JsonObject } from '../../../src/workloads/model.ts';
import { AdmissionServer } from '../../../webhooks/server.ts';
import { workloadAdmissionHandlers } from '../../../webhooks/workload-admission.ts';
import { SwappableCertificates, type TestPki, testPki } from '../../fixtures/webhooks/certs.ts';
import { keepAliveAgent, post } from '../../fixtures/webhooks/client.ts';
import { checkAnswer } from '../../fixtures/webhooks/golden.ts';
import {
  activeWorkload,
  OPERATOR_USER,
  reviewBody,
  stamped,
  workload,
} from '../../fixtures/webhooks/objects.ts';
import { NOW, type World, world } from '../../fixtures/webhooks/world.ts';

const GATE = 'berth.skaphos.io/lease-held';
const RUNS = Number(process.env.PROPERTY_RUNS ?? 1500);
// Replaying a CI failure: PROPERTY_SEED=<seed> PROPERTY_PATH=<path> (as fast-check printed them), with
// `-t <test name>`; PROPERTY_RUNS=20000 for long local searches.
const REPLAY = {
  ...(process.env.PROPERTY_SEED !== undefined ? { seed: Number(process.env.PROPERTY_SEED) } : {}),
  ...(process.env.PROPERTY_PATH !== undefined ? { path: process.env.PROPERTY_PATH } : {}),
};

let pki: TestPki;
let server: AdmissionServer;
let w: World;
const agent = keepAliveAgent();

beforeAll(async () => {
  pki = await testPki(['localhost']);
  w = world();
  // The lease is active and one Pod is registered, so a wrongly allowed ungate is observable.
  w.setWorkload(activeWorkload(w.uids.deployment, NOW + 60_000, [{ name: 'web-5d9c-x1', uid: 'pod-uid' }]));
  w.io.addWorkload(
    'Pod',
    stamped(
      'Pod',
      workload('Pod', 'web-5d9c-x1', {
        uid: 'pod-uid',
        owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
      }),
      w.binding,
    ),
  );
  // A live ReplicaSet no lease governs, to move Pods to.
  w.io.addWorkload('ReplicaSet', workload('ReplicaSet', 'batch-7c1', { uid: 'rs-uid-batch' }));
  const registry = new Registry();
  server = new AdmissionServer({
    port: 0,
    host: '127.0.0.1',
    certificates: new SwappableCertificates(pki.pair),
    handlers: workloadAdmissionHandlers({
      io: () => w.io,
      operatorUser: OPERATOR_USER,
      scope: 'opt-in',
      registry,
      clock: new ManualClock(NOW),
    }),
    registry,
  });
  await server.start();
});

afterAll(async () => {
  agent.destroy();
  await server.close();
});

const send = (path: string, body: string) => post({ port: server.port, path, body, ca: pki.caCert, agent });

// ---- adversarial Pods around the managed chain ----

type OwnerVariant =
  | 'none'
  | 'rs'
  | 'rs-wrong-uid'
  | 'rs-missing'
  | 'daemonset'
  | 'not-controller'
  | 'job'
  | 'rs-unmanaged';

const ownerRefs = (v: OwnerVariant): unknown[] | undefined => {
  const rs = {
    apiVersion: 'apps/v1',
    kind: 'ReplicaSet',
    name: 'web-5d9c',
    uid: w.uids.replicaSet,
    controller: true,
  };
  switch (v) {
    case 'none':
      return undefined;
    case 'rs':
      return [rs];
    case 'rs-wrong-uid':
      return [{ ...rs, uid: 'forged' }];
    case 'rs-missing':
      return [{ ...rs, name: 'gone' }];
    case 'daemonset':
      return [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'agent', uid: 'ds', controller: true }];
    case 'not-controller':
      return [{ ...rs, controller: false }];
    case 'job':
      return [{ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-1', uid: 'job', controller: true }];
    case 'rs-unmanaged':
      return [{ ...rs, name: 'batch-7c1', uid: 'rs-uid-batch' }];
  }
};

/** Mostly undefined (the well-formed case), sometimes one of the values. */
const rarely = <T>(arb: fc.Arbitrary<T>, weight = 1): fc.Arbitrary<T | undefined> =>
  fc.oneof({ arbitrary: fc.constant(undefined), weight: 4 }, { arbitrary: arb, weight });

const podArb = fc.record({
  name: fc.constantFrom('web-5d9c-x1', 'web-5d9c-x2', 'p'),
  uid: fc.option(fc.constantFrom('pod-uid', 'other-uid', ''), { nil: undefined, freq: 4 }),
  owner: fc.constantFrom<OwnerVariant>(
    'none',
    'rs',
    'rs',
    'rs',
    'rs-wrong-uid',
    'rs-missing',
    'daemonset',
    'not-controller',
    'job',
  ),
  stamp: fc.boolean(),
  gates: rarely(fc.subarray([GATE, 'example.com/other']), 2),
  nodeName: rarely(fc.constantFrom('node-1', '')),
  leaseName: rarely(fc.constantFrom('web', 'nightly', '')),
  leaseUid: rarely(fc.constantFrom('lease-uid-web', 'forged', '')),
  dropLabel: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
});
type PodArb = typeof podArb extends fc.Arbitrary<infer T> ? T : never;

function buildPod(p: PodArb): JsonObject {
  let pod = workload('Pod', p.name, p.uid !== undefined ? { uid: p.uid } : {});
  const refs = ownerRefs(p.owner);
  if (refs) (pod.metadata as JsonObject).ownerReferences = refs;
  if (p.stamp) pod = stamped('Pod', pod, w.binding);
  const meta = pod.metadata as { annotations?: Record<string, string>; labels?: Record<string, string> };
  if (p.leaseName !== undefined)
    meta.annotations = { ...meta.annotations, 'berth.skaphos.io/managed-lease': p.leaseName };
  if (p.leaseUid !== undefined)
    meta.annotations = { ...meta.annotations, 'berth.skaphos.io/managed-lease-uid': p.leaseUid };
  if (p.dropLabel && meta.labels) delete meta.labels['berth.skaphos.io/managed-lease-uid'];
  const spec = pod.spec as JsonObject;
  if (p.gates !== undefined) spec.schedulingGates = p.gates.map((name) => ({ name }));
  if (p.nodeName !== undefined) spec.nodeName = p.nodeName;
  return pod;
}

const hasGate = (pod: JsonObject): boolean =>
  (((pod.spec as JsonObject | undefined)?.schedulingGates as { name: string }[] | undefined) ?? []).some(
    (g) => g.name === GATE,
  );

/** Owned (through the live chain) by the managed ReplicaSet: the Pods that must be gated. */
const ownedByManagedRs = (p: PodArb): boolean => p.owner === 'rs';

const junkArb = fc.oneof(
  fc.constant(undefined),
  fc.jsonValue(),
  fc.string(),
  fc.integer(),
  fc.constant(null),
);

describe('adversarial Pod reviews', () => {
  it('never allows a managed Pod without the gate, nor an ungate by anyone but the operator for a registered Pod', async () => {
    const seen = { managedCreatesAllowed: 0, denied: 0 };
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          path: fc.constantFrom('/mutate-managed-workloads', '/validate-managed-workloads'),
          operation: fc.constantFrom('CREATE', 'CREATE', 'UPDATE', 'UPDATE', 'DELETE', 'CONNECT'),
          username: fc.constantFrom('alice', OPERATOR_USER, '', 'system:serviceaccount:berth-system:other'),
          subResource: rarely(fc.constantFrom('binding', 'status', '')),
          dryRun: fc.boolean(),
          pod: podArb,
          old: fc.option(podArb, { nil: undefined }),
          junkField: rarely(
            fc.tuple(
              fc.constantFrom(
                'object.metadata',
                'object.spec',
                'oldObject',
                'userInfo',
                'kind',
                'object.metadata.ownerReferences',
                'namespace',
              ),
              junkArb,
            ),
          ),
        }),
        async (c) => {
          const object = buildPod(c.pod);
          const old = c.old === undefined ? undefined : buildPod({ ...c.old, name: c.pod.name });
          const body = reviewBody('Pod', c.operation as 'CREATE', object, {
            username: c.username,
            dryRun: c.dryRun,
            ...(old ? { old } : {}),
            ...(c.subResource !== undefined ? { subResource: c.subResource } : {}),
          });
          const request = body.request as JsonObject;
          if (c.junkField !== undefined) {
            const [path, value] = c.junkField;
            const keys = path.split('.');
            let at: JsonObject = request;
            for (const k of keys.slice(0, -1)) at = (at[k] as JsonObject | undefined) ?? {};
            at[keys[keys.length - 1]!] = value;
          }
          const uid = request.uid as string;
          const res = await send(c.path, JSON.stringify(body));
          const mutating = c.path.startsWith('/mutate');
          const answer = checkAnswer(
            res.status,
            String(res.headers['content-type']),
            res.body,
            uid,
            mutating,
          );
          if (!answer.allowed) seen.denied++;
          if (!answer.allowed || c.junkField !== undefined || c.subResource !== undefined) return;
          if (c.operation === 'CREATE' && ownedByManagedRs(c.pod)) {
            seen.managedCreatesAllowed++;
            const final = mutating
              ? jsonpatch.applyPatch(structuredClone(object), (answer.patch ?? []) as jsonpatch.Operation[])
                  .newDocument
              : object;
            expect(hasGate(final), 'managed Pod allowed without the gate').toBe(true);
          }
          if (
            !mutating &&
            c.operation === 'UPDATE' &&
            old !== undefined &&
            hasGate(old) &&
            !hasGate(object)
          ) {
            const managed = (
              (old.metadata as JsonObject).annotations as Record<string, string> | undefined
            )?.['berth.skaphos.io/managed-lease-uid'];
            if (managed !== undefined || ownedByManagedRs(c.old!)) {
              expect(c.username, 'gate removed by someone else').toBe(OPERATOR_USER);
              expect(managed, 'gate removed under a forged binding').toBe(w.uids.lease);
              expect((object.metadata as JsonObject).uid).toBe('pod-uid');
              expect((object.metadata as JsonObject).name).toBe('web-5d9c-x1');
            }
          }
        },
      ),
      { numRuns: RUNS, ...REPLAY },
    );
    // The invariants were exercised, not vacuously true (unless one recorded case is being replayed).
    if (REPLAY.path === undefined) expect(seen.managedCreatesAllowed).toBeGreaterThan(RUNS / 100);
    if (REPLAY.path === undefined) expect(seen.denied).toBeGreaterThan(RUNS / 10);
  }, 120_000);

  it('only the operator lifts the gate, and only for the registered (name, uid) under the live binding', async () => {
    let allowed = 0;
    const registered = () =>
      stamped(
        'Pod',
        workload('Pod', 'web-5d9c-x1', {
          uid: 'pod-uid',
          owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: w.uids.replicaSet },
        }),
        w.binding,
      );
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          username: fc.constantFrom(
            OPERATOR_USER,
            OPERATOR_USER,
            'alice',
            'system:serviceaccount:berth-system:other',
            '',
          ),
          name: fc.constantFrom('web-5d9c-x1', 'web-5d9c-x1', 'web-5d9c-x2'),
          uid: fc.constantFrom('pod-uid', 'pod-uid', 'other-uid', ''),
          leaseUid: rarely(fc.constantFrom('forged', '')),
          leaseName: rarely(fc.constantFrom('nightly', '')),
          oldForged: fc.boolean(),
          owner: rarely(fc.constantFrom<OwnerVariant>('none', 'rs-wrong-uid', 'daemonset')),
          nodeName: rarely(fc.constant('node-1')),
          otherGates: fc.subarray(['example.com/other']),
        }),
        async (c) => {
          const old = registered();
          const oldMeta = old.metadata as {
            name: string;
            uid: string;
            annotations: Record<string, string>;
            labels: Record<string, string>;
          };
          oldMeta.name = c.name;
          oldMeta.uid = c.uid;
          if (c.oldForged && c.leaseUid !== undefined) {
            oldMeta.annotations['berth.skaphos.io/managed-lease-uid'] = c.leaseUid;
            oldMeta.labels['berth.skaphos.io/managed-lease-uid'] = c.leaseUid;
          }
          if (c.oldForged && c.leaseName !== undefined)
            oldMeta.annotations['berth.skaphos.io/managed-lease'] = c.leaseName;
          (old.spec as JsonObject).schedulingGates = [
            { name: GATE },
            ...c.otherGates.map((name) => ({ name })),
          ];
          const next = structuredClone(old);
          const nextMeta = next.metadata as typeof oldMeta & { ownerReferences?: unknown[] };
          if (!c.oldForged && c.leaseUid !== undefined)
            nextMeta.annotations['berth.skaphos.io/managed-lease-uid'] = c.leaseUid;
          if (!c.oldForged && c.leaseName !== undefined)
            nextMeta.annotations['berth.skaphos.io/managed-lease'] = c.leaseName;
          if (c.owner !== undefined) nextMeta.ownerReferences = ownerRefs(c.owner);
          (next.spec as JsonObject).schedulingGates = c.otherGates.map((name) => ({ name }));
          if (c.nodeName !== undefined) (next.spec as JsonObject).nodeName = c.nodeName;
          const body = reviewBody('Pod', 'UPDATE', next, { old, username: c.username });
          const res = await send('/validate-managed-workloads', JSON.stringify(body));
          const answer = checkAnswer(
            res.status,
            'application/json',
            res.body,
            (body.request as JsonObject).uid as string,
            false,
          );
          if (!answer.allowed) return;
          allowed++;
          expect(c.username).toBe(OPERATOR_USER);
          expect([c.name, c.uid]).toEqual(['web-5d9c-x1', 'pod-uid']);
          expect(
            c.leaseUid === undefined &&
              c.leaseName === undefined &&
              c.owner === undefined &&
              c.nodeName === undefined,
          ).toBe(true);
        },
      ),
      { numRuns: RUNS, ...REPLAY },
    );
    if (REPLAY.path === undefined) expect(allowed).toBeGreaterThan(0);
  }, 120_000);
});

describe('owner changes around the managed chain', () => {
  it('a Pod of the managed ReplicaSet never changes owners, whoever asks and whatever its metadata', async () => {
    const owners: OwnerVariant[] = [
      'none',
      'rs',
      'rs-wrong-uid',
      'rs-missing',
      'daemonset',
      'not-controller',
      'job',
      'rs-unmanaged',
    ];
    let allowed = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          username: fc.constantFrom('alice', OPERATOR_USER, ''),
          old: podArb,
          next: podArb,
          oldOwner: fc.constantFrom<OwnerVariant>('rs', 'rs', ...owners),
          nextOwner: fc.constantFrom<OwnerVariant>(...owners),
        }),
        async (c) => {
          const old = buildPod({ ...c.old, owner: c.oldOwner });
          const object = buildPod({ ...c.next, name: c.old.name, owner: c.nextOwner });
          const body = reviewBody('Pod', 'UPDATE', object, { old, username: c.username });
          const res = await send('/validate-managed-workloads', JSON.stringify(body));
          const answer = checkAnswer(
            res.status,
            'application/json',
            res.body,
            (body.request as JsonObject).uid as string,
            false,
          );
          if (!answer.allowed) return;
          allowed++;
          if (c.oldOwner === 'rs') {
            expect(c.nextOwner, 'a Pod left (or moved within) the managed chain').toBe('rs');
            expect((object.metadata as JsonObject).ownerReferences).toEqual(
              (old.metadata as JsonObject).ownerReferences,
            );
          }
          if (hasGate(old) && !hasGate(object) && (c.oldOwner === 'rs' || c.nextOwner === 'rs')) {
            expect(c.username, 'gate removed by someone else').toBe(OPERATOR_USER);
          }
        },
      ),
      { numRuns: RUNS, ...REPLAY },
    );
    if (REPLAY.path === undefined) expect(allowed).toBeGreaterThan(RUNS / 100);
  }, 120_000);
});

describe('malformed bodies', () => {
  it('any JSON value: a valid AdmissionReview or a 4xx, never anything else', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/mutate-managed-workloads', '/validate-managed-workloads'),
        fc.oneof(
          fc.jsonValue(),
          fc.record({
            apiVersion: fc.constantFrom('admission.k8s.io/v1', 'admission.k8s.io/v1beta1', 'x'),
            kind: fc.constantFrom('AdmissionReview', 'x'),
            request: fc.jsonValue(),
          }),
          fc.record({
            apiVersion: fc.constant('admission.k8s.io/v1'),
            kind: fc.constant('AdmissionReview'),
            request: fc.record(
              {
                uid: fc.oneof(fc.uuid(), fc.string(), fc.integer()),
                kind: fc.oneof(
                  fc.record({
                    group: fc.constantFrom('', 'apps', 'batch'),
                    version: fc.constant('v1'),
                    kind: fc.constantFrom(
                      'Pod',
                      'Deployment',
                      'CronJob',
                      'Job',
                      'ReplicaSet',
                      'StatefulSet',
                      'Secret',
                    ),
                  }),
                  fc.jsonValue(),
                ),
                resource: fc.oneof(
                  fc.record({ group: fc.string(), version: fc.string(), resource: fc.string() }),
                  fc.jsonValue(),
                ),
                operation: fc.oneof(fc.constantFrom('CREATE', 'UPDATE', 'DELETE', 'CONNECT'), fc.string()),
                namespace: fc.oneof(fc.constant('shop'), fc.string(), fc.jsonValue()),
                name: fc.oneof(fc.string(), fc.jsonValue()),
                subResource: fc.oneof(fc.constantFrom('binding', 'status'), fc.jsonValue()),
                userInfo: fc.oneof(fc.record({ username: fc.string() }), fc.jsonValue()),
                object: fc.oneof(
                  fc.jsonValue(),
                  fc.record({ metadata: fc.jsonValue(), spec: fc.jsonValue() }),
                ),
                oldObject: fc.oneof(
                  fc.jsonValue(),
                  fc.record({ metadata: fc.jsonValue(), spec: fc.jsonValue() }),
                ),
                dryRun: fc.jsonValue(),
              },
              { requiredKeys: [] },
            ),
          }),
        ),
        async (path, value) => {
          const res = await send(path, JSON.stringify(value));
          if (res.status !== 200) {
            expect(res.status).toBeGreaterThanOrEqual(400);
            expect(res.status).toBeLessThan(500);
            return;
          }
          const review = value as { apiVersion: string; request: { uid: string } };
          const version = review.apiVersion === 'admission.k8s.io/v1beta1' ? 'v1beta1' : 'v1';
          checkAnswer(
            res.status,
            String(res.headers['content-type']),
            res.body,
            review.request.uid,
            path.startsWith('/mutate'),
            version,
          );
        },
      ),
      { numRuns: RUNS, ...REPLAY },
    );
  }, 120_000);

  it('arbitrary bytes: a 4xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 512 }), async (bytes) => {
        const res = await post({
          port: server.port,
          path: '/validate-managed-workloads',
          body: Buffer.from(bytes),
          ca: pki.caCert,
          agent,
        });
        if (res.status === 200) {
          // Only possible when the bytes happen to be a JSON AdmissionReview with a uid.
          const parsed = JSON.parse(Buffer.from(bytes).toString('utf8')) as { request: { uid: string } };
          checkAnswer(200, 'application/json', res.body, parsed.request.uid, false);
        } else {
          expect(res.status).toBeGreaterThanOrEqual(400);
          expect(res.status).toBeLessThan(500);
        }
      }),
      { numRuns: 300 },
    );
  }, 60_000);

  it('the server is still serving afterwards', async () => {
    await expect(Promise.resolve(server.startedCheck())).resolves.toBeUndefined();
  });
});
