// The Kubernetes lease store's pure mapping: object names (the Go layout, and the legacy hash names
// still read), MicroTime, record <-> Lease, ownership checks and the migration's List plan.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  encodeKey,
  isMigrated,
  keyOfLease,
  type LeaseObject,
  leaseObjectName,
  legacyObjectName,
  legacyProblem,
  MANAGED_BY_LABEL,
  MIGRATED_TO_ANNOTATION,
  MIGRATED_VALUE,
  NAME_ANNOTATION,
  NAMESPACE_ANNOTATION,
  newLease,
  objectNameProblem,
  ownershipProblem,
  planList,
  recordFromLease,
  sealedLease,
  unrepresentable,
  updatedLease,
  VERSION_ANNOTATION,
  versionOfLease,
} from '../../../src/central/k8slease.ts';
import type { LeaseKey, LeaseRecord } from '../../../src/central/record.ts';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const T0 = Date.UTC(2026, 8, 7, 9, 0, 0, 123);

// Any strings, biased towards the characters that break naive joins and encodings.
const nasty = fc.oneof(
  fc.string({ unit: fc.constantFrom('a', 'b', '.', '-', '/', '"', '\\', ',', '[', ']', '\0', ':') }),
  fc.string({ unit: 'grapheme' }),
  fc.string(),
);
const anyKey = fc.record({ namespace: nasty, name: nasty });

// Keys the API accepts, biased towards dots, dashes and the length limits.
const label = (max: number) =>
  fc
    .tuple(
      fc.constantFrom('a', 'b', '0'),
      fc.string({ unit: fc.constantFrom('a', 'b', '-', '0'), maxLength: max - 2 }),
    )
    .map(([first, rest]) => (rest === '' ? first : `${first}${rest.replace(/-+$/, '')}`));
const apiKey = fc
  .record({
    namespace: fc.oneof(label(8), label(63)),
    name: fc.array(fc.oneof(label(8), label(63)), { minLength: 1, maxLength: 4 }).map((p) => p.join('.')),
  })
  .filter((k) => objectNameProblem(k) === undefined);

const record = (key: LeaseKey, overrides: Partial<LeaseRecord> = {}): LeaseRecord => ({
  key,
  holder: 'cluster-east',
  ttlMs: 30_000,
  acquiredAt: T0,
  renewedAt: T0 + 1_000,
  fencingToken: 7,
  version: 0,
  ...overrides,
});

describe('lease object names', () => {
  it("are the Go server's <namespace>.<name>", () => {
    expect(leaseObjectName({ namespace: 'pipeline', name: 'ingest' })).toBe('pipeline.ingest');
    expect(leaseObjectName({ namespace: 'a', name: 'b.c' })).toBe('a.b.c');
  });

  it('are valid DNS subdomains for every key the API accepts, and give the key back at the first dot', () => {
    fc.assert(
      fc.property(apiKey, (key) => {
        const name = leaseObjectName(key);
        expect(name).toMatch(DNS_SUBDOMAIN);
        expect(name.length).toBeLessThanOrEqual(253);
        const dot = name.indexOf('.');
        expect({ namespace: name.slice(0, dot), name: name.slice(dot + 1) }).toEqual(key);
      }),
      { numRuns: 2_000 },
    );
  });

  it('exist only for keys the API accepts: the limit is named, lookalikes of an accepted key are refused', () => {
    const ns = 'x'.repeat(63);
    expect(objectNameProblem({ namespace: ns, name: 'y'.repeat(189) })).toBeUndefined();
    expect(objectNameProblem({ namespace: ns, name: 'y'.repeat(190) })).toBe(
      `invalid key ${ns}/${'y'.repeat(190)}: namespace and name joined with '.' must be at most 253 characters, got 254`,
    );
    // {a, b.c} is accepted as a.b.c; every other key that would join to it is refused.
    expect(objectNameProblem({ namespace: 'a', name: 'b.c' })).toBeUndefined();
    expect(objectNameProblem({ namespace: 'a.b', name: 'c' })).toMatch(
      /^invalid namespace "a\.b": must be an RFC 1123 DNS label/,
    );
    expect(objectNameProblem({ namespace: 'a', name: 'b/c' })).toMatch(/^invalid name "b\/c"/);
    expect(objectNameProblem({ namespace: 'A', name: 'b' })).toMatch(/^invalid namespace/);
    expect(objectNameProblem({ namespace: 'a', name: 'y'.repeat(254) })).toMatch(/^invalid name/);
  });

  it('are distinct for distinct accepted keys', () => {
    fc.assert(
      fc.property(apiKey, apiKey, (a, b) => {
        fc.pre(a.namespace !== b.namespace || a.name !== b.name);
        expect(leaseObjectName(a)).not.toBe(leaseObjectName(b));
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('legacy object names', () => {
  it('are berth- plus the full SHA-256 of the JSON [namespace, name], as earlier versions wrote them', () => {
    // sha256 of the 21 bytes ["pipeline","ingest"], as `sha256sum` gives it.
    expect(legacyObjectName({ namespace: 'pipeline', name: 'ingest' })).toBe(
      'berth-672e480b23f7936f8af19d4bf7cd6017b7249b1da96f43d5e20039bf77d1d70c',
    );
    fc.assert(
      fc.property(anyKey, (key) => {
        expect(legacyObjectName(key)).toMatch(/^berth-[0-9a-f]{64}$/);
        expect(JSON.parse(encodeKey(key))).toEqual([key.namespace, key.name]);
      }),
    );
  });

  it('never equal a Go-layout name (one has a dot, the other none), nor each other', () => {
    fc.assert(
      fc.property(apiKey, apiKey, (a, b) => {
        expect(legacyObjectName(a)).not.toBe(leaseObjectName(b));
        if (a.namespace !== b.namespace || a.name !== b.name)
          expect(legacyObjectName(a)).not.toBe(legacyObjectName(b));
      }),
    );
  });
});

describe('record <-> Lease', () => {
  const key = { namespace: 'pipeline', name: 'ingest' };

  it('maps the fields as the spec says and round-trips', () => {
    const lease = newLease(leaseObjectName(key), 'berth-system', record(key));
    expect(lease).toEqual({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: leaseObjectName(key),
        namespace: 'berth-system',
        labels: { [MANAGED_BY_LABEL]: 'berth' },
        annotations: {
          [NAMESPACE_ANNOTATION]: 'pipeline',
          [NAME_ANNOTATION]: 'ingest',
          [VERSION_ANNOTATION]: '1',
        },
      },
      spec: {
        holderIdentity: 'cluster-east',
        leaseDurationSeconds: 30,
        acquireTime: '2026-09-07T09:00:00.123000Z',
        renewTime: '2026-09-07T09:00:01.123000Z',
        leaseTransitions: 7,
      },
    });
    expect(recordFromLease(lease, key)).toEqual(record(key, { version: 1 }));
  });

  it('round-trips any representable record', () => {
    const arb = fc.record({
      holder: fc.string(),
      ttlMs: fc.integer({ min: 0, max: 1_000_000 }).map((s) => s * 1000),
      acquiredAt: fc.integer({ min: 0, max: 4_102_444_800_000 }),
      renewedAt: fc.integer({ min: 0, max: 4_102_444_800_000 }),
      fencingToken: fc.integer({ min: 0, max: 2_147_483_647 }),
      version: fc.integer({ min: 1, max: 1e12 }),
    });
    fc.assert(
      fc.property(anyKey, arb, (k, fields) => {
        const r = { key: k, ...fields };
        const base = newLease(leaseObjectName(k), 'ns', record(k));
        const lease = updatedLease(base, r, fields.version);
        expect(unrepresentable(r)).toBeUndefined();
        expect(recordFromLease(lease, k)).toEqual(r);
        expect(keyOfLease(lease)).toEqual(k);
      }),
    );
  });

  it('writes a tombstone without holder and duration', () => {
    const current = {
      ...newLease('n', 'ns', record(key)),
      metadata: { ...newLease('n', 'ns', record(key)).metadata, resourceVersion: '41' },
    };
    const tomb = updatedLease(current, record(key, { holder: '', ttlMs: 0 }), 2);
    expect(tomb.spec).not.toHaveProperty('holderIdentity');
    expect(tomb.spec).not.toHaveProperty('leaseDurationSeconds');
    expect(tomb.metadata.resourceVersion).toBe('41');
    expect(recordFromLease(tomb, key)).toMatchObject({ holder: '', ttlMs: 0, fencingToken: 7, version: 2 });
  });

  it('keeps labels, annotations and spec fields written by others', () => {
    const current: LeaseObject = newLease('n', 'ns', record(key));
    current.metadata.labels!.team = 'storage';
    current.metadata.annotations!['example.com/note'] = 'hi';
    current.metadata.uid = 'u-1';
    current.spec!.strategy = 'OldestEmulationVersion';
    const next = updatedLease(current, record(key, { holder: 'west' }), 5);
    expect(next.metadata).toMatchObject({
      uid: 'u-1',
      labels: { team: 'storage', [MANAGED_BY_LABEL]: 'berth' },
      annotations: { 'example.com/note': 'hi', [VERSION_ANNOTATION]: '5' },
    });
    expect(next.spec).toMatchObject({ strategy: 'OldestEmulationVersion', holderIdentity: 'west' });
    expect(current.metadata.annotations![VERSION_ANNOTATION]).toBe('1');
  });

  it('reads a missing version annotation as 1 and rejects a malformed one', () => {
    const lease = newLease('n', 'ns', record(key));
    delete lease.metadata.annotations![VERSION_ANNOTATION];
    expect(versionOfLease(lease)).toBe(1);
    lease.metadata.annotations![VERSION_ANNOTATION] = '01';
    expect(() => versionOfLease(lease)).toThrow('invalid berth.skaphos.io/version');
  });

  it('refuses records a Lease cannot hold exactly', () => {
    expect(unrepresentable(record(key, { ttlMs: 1_500 }))).toMatch('whole number of seconds');
    expect(unrepresentable(record(key, { fencingToken: 2_147_483_648 }))).toMatch('int32');
  });
});

describe('objects the Go server writes', () => {
  const key = { namespace: 'pipeline', name: 'ingest' };
  // As the Go 0.4.2 store builds them: holderIdentity always set ("" for a tombstone), no duration
  // for a tombstone, and (before the version annotation existed) no version.
  const goLease = (spec: LeaseObject['spec'], annotations: Record<string, string> = {}): LeaseObject => ({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: 'pipeline.ingest',
      labels: { [MANAGED_BY_LABEL]: 'berth' },
      annotations: { [NAMESPACE_ANNOTATION]: 'pipeline', [NAME_ANNOTATION]: 'ingest', ...annotations },
    },
    spec,
  });

  it('read as the records they hold, a missing version as 1', () => {
    const held = goLease(
      {
        holderIdentity: 'cluster-east',
        leaseDurationSeconds: 30,
        acquireTime: '2026-09-07T09:00:00.123456Z',
        renewTime: '2026-09-07T09:00:01.123456Z',
        leaseTransitions: 41,
      },
      { [VERSION_ANNOTATION]: '77' },
    );
    expect(ownershipProblem(held, key)).toBeUndefined();
    expect(recordFromLease(held, key)).toEqual(record(key, { fencingToken: 41, version: 77 }));
    const tomb = goLease({
      holderIdentity: '',
      acquireTime: '2026-09-07T09:00:00.123456Z',
      renewTime: '2026-09-07T09:00:01.123456Z',
      leaseTransitions: 41,
    });
    expect(recordFromLease(tomb, key)).toEqual(
      record(key, { holder: '', ttlMs: 0, fencingToken: 41, version: 1 }),
    );
  });
});

describe('ownership', () => {
  const key = { namespace: 'a', name: 'b' };
  it('accepts only our objects for the key asked for', () => {
    const lease = newLease(leaseObjectName(key), 'ns', record(key));
    expect(ownershipProblem(lease, key)).toBeUndefined();
    expect(ownershipProblem(lease, { namespace: 'a', name: 'c' })).toBe(
      'lease a.b holds ["a","b"], not ["a","c"] (a foreign object on the name)',
    );
    delete lease.metadata.annotations![NAME_ANNOTATION];
    expect(ownershipProblem(lease, key)).toBe('lease a.b has no key annotations');
    delete lease.metadata.labels![MANAGED_BY_LABEL];
    expect(ownershipProblem(lease, key)).toBe('lease a.b is not labelled berth.skaphos.io/managed-by=berth');
  });

  it('never takes a sealed legacy object for a Go-layout one', () => {
    const legacy = newLease(legacyObjectName(key), 'ns', record(key));
    expect(ownershipProblem(sealedLease(legacy, key), key)).toMatch('is not labelled');
  });
});

describe('legacy objects and their seal', () => {
  const key = { namespace: 'pipeline', name: 'ingest' };
  const live = (): LeaseObject => ({
    ...newLease(legacyObjectName(key), 'ns', record(key), 5),
    metadata: { ...newLease(legacyObjectName(key), 'ns', record(key), 5).metadata, resourceVersion: '9' },
  });

  it('seals by relabelling and pointing at the new name, keeping record, version and resourceVersion', () => {
    const legacy = live();
    legacy.metadata.labels!.team = 'storage';
    const sealed = sealedLease(legacy, key);
    expect(isMigrated(legacy)).toBe(false);
    expect(isMigrated(sealed)).toBe(true);
    expect(sealed.metadata).toMatchObject({
      name: legacyObjectName(key),
      resourceVersion: '9',
      labels: { [MANAGED_BY_LABEL]: MIGRATED_VALUE, team: 'storage' },
      annotations: { [MIGRATED_TO_ANNOTATION]: 'pipeline.ingest', [VERSION_ANNOTATION]: '5' },
    });
    expect(sealed.spec).toEqual(legacy.spec);
    expect(recordFromLease(sealed, key)).toEqual(recordFromLease(legacy, key));
    expect(legacy.metadata.labels![MANAGED_BY_LABEL]).toBe('berth');
  });

  it('are accepted live or sealed for their key only, sealed only when pointing at its new name', () => {
    expect(legacyProblem(live(), key)).toBeUndefined();
    expect(legacyProblem(sealedLease(live(), key), key)).toBeUndefined();
    expect(legacyProblem(live(), { namespace: 'pipeline', name: 'other' })).toMatch('a foreign object');
    const elsewhere = sealedLease(live(), key);
    elsewhere.metadata.annotations![MIGRATED_TO_ANNOTATION] = 'pipeline.other';
    expect(legacyProblem(elsewhere, key)).toBe(
      `lease ${legacyObjectName(key)} is marked migrated to "pipeline.other", not pipeline.ingest`,
    );
    const foreign = live();
    foreign.metadata.labels![MANAGED_BY_LABEL] = 'someone-else';
    expect(legacyProblem(foreign, key)).toMatch('is not labelled');
  });

  it('carry their version into the new object', () => {
    const legacy = live();
    const moved = newLease(leaseObjectName(key), 'ns', recordFromLease(legacy, key), versionOfLease(legacy));
    expect(recordFromLease(moved, key)).toEqual(recordFromLease(legacy, key));
    expect(moved.metadata.annotations![VERSION_ANNOTATION]).toBe('5');
  });
});

describe('List plan', () => {
  const a = { namespace: 'pipeline', name: 'a' };
  const b = { namespace: 'pipeline', name: 'b' };
  const c = { namespace: 'pipeline', name: 'c' };
  const go = (key: LeaseKey) => newLease(leaseObjectName(key), 'ns', record(key));
  const legacy = (key: LeaseKey) => newLease(legacyObjectName(key), 'ns', record(key));
  const names = (entries: Array<{ lease: LeaseObject }>) => entries.map((e) => e.lease.metadata.name).sort();

  it('reports Go-layout objects, migrates lone legacy ones and seals those that already have a new one', () => {
    const plan = planList([legacy(a), go(b), legacy(b), go(c)]);
    expect(names(plan.current)).toEqual(['pipeline.b', 'pipeline.c']);
    expect(plan.migrate).toEqual([{ key: a, lease: legacy(a) }]);
    expect(plan.seal).toEqual([{ key: b, lease: legacy(b) }]);
  });

  it('gives each key at most once, whatever the order', () => {
    fc.assert(
      fc.property(fc.shuffledSubarray([legacy(a), go(a), legacy(b), go(b), legacy(c)]), (leases) => {
        const plan = planList(leases);
        const reported = [...plan.current, ...plan.migrate].map((e) => e.key.name);
        expect(new Set(reported).size).toBe(reported.length);
        for (const e of plan.migrate)
          expect(leases.some((l) => l.metadata.name === leaseObjectName(e.key))).toBe(false);
        for (const e of plan.seal) expect(plan.current.some((c) => c.key.name === e.key.name)).toBe(true);
      }),
    );
  });

  it('skips foreign objects, sealed objects, keys the API refuses and legacy keys whose new name is squatted', () => {
    const squatter = go(a);
    squatter.metadata.annotations![NAME_ANNOTATION] = 'b'; // under pipeline.a, claims pipeline/b
    const unlabelled = go(c);
    delete unlabelled.metadata.labels![MANAGED_BY_LABEL];
    const refused = { namespace: 'pipe/line', name: 'x' };
    const unannotated = go(b);
    unannotated.metadata.annotations = {};
    const plan = planList([
      squatter,
      legacy(a),
      unlabelled,
      sealedLease(legacy(c), c),
      legacy(refused),
      unannotated,
    ]);
    expect(plan).toEqual({ current: [], migrate: [], seal: [] });
  });
});
