// What the admission server does with a body before any handler sees it (webhooks/review.ts): the walk
// for prototype-poisoning keys, however the text writes them, and zod's parse of the review, whose output
// the handlers decide on and compute their patches against, so it must hand the objects on as they were
// sent. Properties on generated input.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { admissionReviewSchema, prototypeKey } from '../../../webhooks/review.ts';
import { reviewBody, workload } from '../../fixtures/webhooks/objects.ts';
import { mutate, mutationOf } from '../../helpers/mutations.ts';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 3000);

const VALID = JSON.parse(
  JSON.stringify(
    reviewBody('Pod', 'CREATE', workload('Pod', 'web-0', { namespace: 'shop' }), {
      username: 'system:serviceaccount:kube-system:replicaset-controller',
    }),
  ),
) as Record<string, unknown>;

// Every field the schema constrains, and a few inside them, so mutations hit each check.
const PATHS = [
  ['apiVersion'],
  ['kind'],
  ['request'],
  ['request', 'uid'],
  ['request', 'kind'],
  ['request', 'kind', 'group'],
  ['request', 'kind', 'version'],
  ['request', 'kind', 'kind'],
  ['request', 'resource'],
  ['request', 'resource', 'group'],
  ['request', 'resource', 'version'],
  ['request', 'resource', 'resource'],
  ['request', 'subResource'],
  ['request', 'requestKind'],
  ['request', 'requestKind', 'kind'],
  ['request', 'requestResource'],
  ['request', 'requestResource', 'resource'],
  ['request', 'requestSubResource'],
  ['request', 'name'],
  ['request', 'namespace'],
  ['request', 'operation'],
  ['request', 'userInfo'],
  ['request', 'userInfo', 'username'],
  ['request', 'userInfo', 'uid'],
  ['request', 'userInfo', 'groups'],
  ['request', 'userInfo', 'groups', '0'],
  ['request', 'userInfo', 'extra'],
  ['request', 'userInfo', 'extra', 'scopes'],
  ['request', 'userInfo', 'extra', 'scopes', '0'],
  ['request', 'object'],
  ['request', 'oldObject'],
  ['request', 'dryRun'],
  ['request', 'options'],
  ['request', 'extraField'],
];

// Values near each check's edges, plus arbitrary JSON.
const value = fc.oneof(
  fc.constantFrom(
    null,
    true,
    false,
    0,
    '',
    'x',
    'has space',
    'x'.repeat(256),
    'x'.repeat(257),
    'CREATE',
    'PATCH',
    'AdmissionReview',
    'admission.k8s.io/v1',
    'admission.k8s.io/v1beta1',
    [],
    ['a'],
    [1],
    {},
    { group: '', version: 'v1', kind: 'Pod' },
    { group: '', version: 'v1', resource: 'pods' },
    { scopes: ['a', 'b'] },
    { scopes: 'a' },
  ),
  fc.jsonValue({ maxDepth: 2 }),
);

const mutation = mutationOf(PATHS, value);

describe('admissionReviewSchema', () => {
  it('hands the objects of every review it accepts on as they were sent', () => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 0, maxLength: 4 }), (mutations) => {
        const body = mutate(VALID, mutations);
        fc.pre(prototypeKey(body) === undefined);
        const parsed = admissionReviewSchema.safeParse(body);
        if (!parsed.success) return;
        accepted++;
        const request = (body as { request: Record<string, unknown> }).request;
        expect(parsed.data.request.object).toStrictEqual(request.object);
        expect(parsed.data.request.oldObject).toStrictEqual(request.oldObject);
      }),
      { numRuns: RUNS },
    );
    expect(accepted).toBeGreaterThan(RUNS / 10);
  });

  it('accepts the review kube-apiserver sends, in both versions', () => {
    expect(admissionReviewSchema.safeParse(VALID).success).toBe(true);
    expect(
      admissionReviewSchema.safeParse({ ...VALID, apiVersion: 'admission.k8s.io/v1beta1' }).success,
    ).toBe(true);
    expect(admissionReviewSchema.safeParse({ ...VALID, apiVersion: 'admission.k8s.io/v2' }).success).toBe(
      false,
    );
  });
});

// A JSON document as a tree whose objects are lists of entries, so that `__proto__` can be a key of the
// text (an object literal would set the prototype instead).
type Tree = null | boolean | number | string | Tree[] | { entries: [string, Tree][] };

const KEYS = ['__proto__', 'constructor', 'prototype', 'proto', '_', 'name', 'x'];
const { tree } = fc.letrec<{ tree: Tree }>((t) => ({
  tree: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(null, true, 1, 'v', '__proto__', 'a<b'),
    fc.array(t('tree'), { maxLength: 3 }),
    fc.record({ entries: fc.array(fc.tuple(fc.constantFrom(...KEYS), t('tree')), { maxLength: 4 }) }),
  ),
}));

/** Serialises a tree, writing each character of each string as a \u escape when `coin()` says so. */
function toJson(node: Tree, coin: () => boolean): string {
  const str = (s: string): string => {
    let out = '"';
    for (let i = 0; i < s.length; i++) {
      if (coin()) {
        const hex = s.charCodeAt(i).toString(16).padStart(4, '0');
        out += `\\u${coin() ? hex.toUpperCase() : hex}`;
      } else out += JSON.stringify(s[i]).slice(1, -1);
    }
    return `${out}"`;
  };
  if (node === null || typeof node === 'boolean' || typeof node === 'number') return JSON.stringify(node);
  if (typeof node === 'string') return str(node);
  if (Array.isArray(node)) return `[${node.map((n) => toJson(n, coin)).join(',')}]`;
  return `{${node.entries.map(([k, v]) => `${str(k)}${coin() ? ' ' : ''}:${toJson(v, coin)}`).join(',')}}`;
}

/**
 * Whether the document JSON.parse makes of a tree holds a prototype-poisoning key, read off the tree
 * (a later duplicate key replaces an earlier one, as in JSON.parse).
 */
function poisoned(node: Tree): boolean {
  if (node === null || typeof node !== 'object') return false;
  if (Array.isArray(node)) return node.some(poisoned);
  const fields = new Map(node.entries);
  const ctor = fields.get('constructor');
  const ctorHoldsPrototype =
    ctor !== undefined && ctor !== null && typeof ctor === 'object' && !Array.isArray(ctor)
      ? ctor.entries.some(([k]) => k === 'prototype')
      : false;
  return fields.has('__proto__') || ctorHoldsPrototype || [...fields.values()].some(poisoned);
}

describe('prototypeKey', () => {
  it('finds a prototype-poisoning key however the text writes it, and only then', () => {
    let found = 0;
    fc.assert(
      fc.property(tree, fc.infiniteStream(fc.boolean()), (t, coins) => {
        const text = toJson(t, () => coins.next().value as boolean);
        const expected = poisoned(t);
        if (expected) found++;
        expect(prototypeKey(JSON.parse(text)) !== undefined).toBe(expected);
      }),
      { numRuns: RUNS },
    );
    // The generator must actually produce such keys, escaped and not, for the property to mean anything.
    expect(found).toBeGreaterThan(RUNS / 20);
  });
});
