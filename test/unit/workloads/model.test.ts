// The workload model's one parser (src/workloads/model.ts). Admission computes its JSON patches against
// what parseWorkload returns, and the API server applies them to the object as it was sent: so whatever the
// parser accepts must come back equal to its input (the schema is loose: unknown fields pass through),
// and it must accept every workload kube sends. These properties check that on generated workloads and
// arbitrary JSON.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type JsonObject,
  parseStoredWorkload,
  parseWorkload,
  workloadSchema,
} from '../../../src/workloads/model.ts';
import { type Kind, workload } from '../../fixtures/webhooks/objects.ts';
import { mutate, mutationOf } from '../../helpers/mutations.ts';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 3000);

/** A Pod as the reconciler reads it back: the fields only stored objects carry. */
function storedPod(): JsonObject {
  const pod = workload('Pod', 'web', { uid: 'u-1' });
  Object.assign(pod.metadata as JsonObject, { creationTimestamp: '2026-01-01T00:00:00Z' });
  return { ...pod, status: { phase: 'Running' } };
}

const KINDS: Kind[] = ['Pod', 'Deployment', 'StatefulSet', 'ReplicaSet', 'Job', 'CronJob'];
const BASES = KINDS.flatMap((kind) => [
  workload(kind, 'web'),
  workload(kind, 'web', {
    uid: 'u-1',
    owner: { kind: 'ReplicaSet', name: 'web-5d9c', uid: 'rs-1' },
    labels: { app: 'web' },
    annotations: { 'example.com/a': 'b' },
    nodeName: 'node-1',
    gates: ['berth.skaphos.io/lease-held', 'other'],
    replicas: 2,
    suspend: true,
  }),
]);

const META = ['name', 'generateName', 'namespace', 'uid', 'resourceVersion', 'deletionTimestamp'];
const metadataPaths = (at: string[]): string[][] => [
  at,
  ...META.map((k) => [...at, k]),
  [...at, 'labels'],
  [...at, 'labels', 'app'],
  [...at, 'annotations'],
  [...at, 'annotations', 'example.com/a'],
  [...at, 'ownerReferences'],
  [...at, 'ownerReferences', '0'],
  ...['apiVersion', 'kind', 'name', 'uid', 'controller', 'blockOwnerDeletion'].map((k) => [
    ...at,
    'ownerReferences',
    '0',
    k,
  ]),
  [...at, 'extraField'],
];
const podSpecPaths = (at: string[]): string[][] => [
  at,
  [...at, 'nodeName'],
  [...at, 'schedulingGates'],
  [...at, 'schedulingGates', '0'],
  [...at, 'schedulingGates', '0', 'name'],
  [...at, 'containers'],
];
const templatePaths = (at: string[]): string[][] => [
  at,
  ...metadataPaths([...at, 'metadata']),
  ...podSpecPaths([...at, 'spec']),
];

// Every field the schema constrains, at every place it appears, plus fields it does not know.
const PATHS: string[][] = [
  ['apiVersion'],
  ['kind'],
  ['status'],
  ...metadataPaths(['metadata']),
  ...podSpecPaths(['spec']),
  ['spec', 'replicas'],
  ['spec', 'suspend'],
  ['spec', 'selector'],
  ...templatePaths(['spec', 'template']),
  ['spec', 'jobTemplate'],
  ...metadataPaths(['spec', 'jobTemplate', 'metadata']),
  ['spec', 'jobTemplate', 'spec'],
  ...templatePaths(['spec', 'jobTemplate', 'spec', 'template']),
];

// Values near each check's edges, plus arbitrary JSON; `__proto__` keys as JSON.parse makes them.
const value = fc.oneof(
  fc.constantFrom(
    null,
    true,
    false,
    0,
    -1,
    1.5,
    1e308,
    '',
    'x',
    [],
    ['a'],
    [{ name: 'g' }],
    [{ name: 1 }],
    [null],
    {},
    { a: 'b' },
    { a: 1 },
    { a: null },
    { apiVersion: 'v1', kind: 'X', name: 'n', uid: 'u' },
    { apiVersion: 'v1', kind: 'X', name: 'n', uid: 'u', controller: 'yes' },
    JSON.parse('{"__proto__": {"polluted": true}}'),
    JSON.parse('{"__proto__": "x", "a": "b"}'),
  ),
  fc.jsonValue({ maxDepth: 2 }),
);

const mutation = mutationOf(PATHS, value);

/** Whether the value holds an own `__proto__` key anywhere (zod's copy drops those; admission denies them first). */
function holdsProtoKey(v: unknown): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (Object.hasOwn(v, '__proto__')) return true;
  return Object.values(v).some(holdsProtoKey);
}

/** What parseWorkload accepts it returns unchanged; what it refuses, the schema refuses, naming a field. */
function roundTrips(raw: unknown): void {
  const parsed = parseWorkload(raw);
  if (parsed.ok) {
    if (!holdsProtoKey(raw)) expect(parsed.value).toStrictEqual(raw);
  } else {
    // The schema refuses it too, and the error starts with the path of the schema's first issue.
    const zod = workloadSchema.safeParse(raw);
    expect(zod.success).toBe(false);
    const path = zod.error?.issues[0]?.path.join('.') || '(root)';
    expect(parsed.error.startsWith(`${path}: `)).toBe(true);
  }
}

describe('parseWorkload', () => {
  it('accepts every fixture workload as it is', () => {
    for (const base of BASES) {
      const raw = JSON.parse(JSON.stringify(base)) as unknown;
      expect(parseWorkload(raw)).toStrictEqual({ ok: true, value: raw });
    }
  });

  it('leaves the fields only stored objects carry to parseStoredWorkload', () => {
    const pod = storedPod();
    expect(parseStoredWorkload(pod)).toEqual({ ok: true, value: pod });
    // A review is never refused for them: admission does not read them.
    const review = { ...pod, status: { phase: 1 } };
    expect(parseWorkload(review)).toEqual({ ok: true, value: review });
    expect(parseStoredWorkload(review)).toEqual({
      ok: false,
      error: 'status.phase: missing or not a string',
    });
    const unnamed = { ...pod, metadata: { uid: 'u' } };
    expect(parseStoredWorkload(unnamed)).toEqual({
      ok: false,
      error: 'metadata.name: missing or not a string',
    });
    const dated = { ...pod, metadata: { name: 'web', creationTimestamp: 1 } };
    expect(parseStoredWorkload(dated)).toEqual({
      ok: false,
      error: 'metadata.creationTimestamp: missing or not a string',
    });
  });

  it('returns mutated workloads unchanged or names what is wrong', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...BASES),
        fc.array(mutation, { minLength: 1, maxLength: 4 }),
        (base, mutations) => roundTrips(mutate(base, mutations)),
      ),
      { numRuns: RUNS },
    );
  });

  it('does so on arbitrary JSON too', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => roundTrips(JSON.parse(JSON.stringify(v)))),
      { numRuns: RUNS },
    );
  });

  it('drops a `__proto__` key (the admission server denies such a review before parsing it)', () => {
    const raw = JSON.parse('{"metadata": {"labels": {"__proto__": "x", "a": "b"}}}') as unknown;
    expect(parseWorkload(raw)).toEqual({ ok: true, value: { metadata: { labels: { a: 'b' } } } });
  });

  it('still names what is wrong through zod', () => {
    expect(parseWorkload({ metadata: { labels: { a: 1 } } })).toEqual({
      ok: false,
      error: 'metadata.labels.a: Invalid input: expected string, received number',
    });
  });
});
