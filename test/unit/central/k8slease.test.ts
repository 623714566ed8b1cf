// The Kubernetes lease store's pure mapping: object names (injective), MicroTime, record <-> Lease.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  encodeKey,
  formatMicroTime,
  keyOfLease,
  type LeaseObject,
  leaseObjectName,
  MANAGED_BY_LABEL,
  NAME_ANNOTATION,
  NAMESPACE_ANNOTATION,
  newLease,
  ownershipProblem,
  parseMicroTime,
  recordFromLease,
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
  it('are berth- plus the full SHA-256 of the key: a 70-character DNS subdomain for any key', () => {
    fc.assert(
      fc.property(anyKey, (key) => {
        const name = leaseObjectName(key);
        expect(name).toMatch(/^berth-[0-9a-f]{64}$/);
        expect(name).toMatch(DNS_SUBDOMAIN);
      }),
    );
  });

  it('hash an injective encoding: the key is recovered from it, so distinct keys hash distinct inputs', () => {
    // A left inverse proves injectivity of the encoding: decode(encode(k)) = k for every k.
    fc.assert(
      fc.property(anyKey, (key) => {
        expect(JSON.parse(encodeKey(key))).toEqual([key.namespace, key.name]);
      }),
      { numRuns: 2_000 },
    );
    fc.assert(
      fc.property(anyKey, anyKey, (a, b) => {
        fc.pre(a.namespace !== b.namespace || a.name !== b.name);
        expect(encodeKey(a)).not.toBe(encodeKey(b));
        expect(leaseObjectName(a)).not.toBe(leaseObjectName(b));
      }),
      { numRuns: 2_000 },
    );
  });

  it("separates the keys Go's <ns>.<name> join would merge, and keys past 253 characters", () => {
    const keys: LeaseKey[] = [
      { namespace: 'a', name: 'b.c' },
      { namespace: 'a.b', name: 'c' },
      { namespace: 'a', name: 'b-c' },
      { namespace: 'a-b', name: 'c' },
      { namespace: 'x'.repeat(63), name: 'y'.repeat(300) },
      { namespace: 'x'.repeat(63), name: `${'y'.repeat(299)}z` },
    ];
    expect(new Set(keys.map(leaseObjectName)).size).toBe(keys.length);
  });

  it('show no collision over 20,000 distinct generated keys', () => {
    const keys = fc.sample(anyKey, { numRuns: 20_000, seed: 42 });
    const encoded = new Set(keys.map(encodeKey));
    const names = new Set(keys.map(leaseObjectName));
    expect(names.size).toBe(encoded.size);
  });
});

describe('MicroTime', () => {
  it('always has exactly six fractional digits, in UTC', () => {
    expect(formatMicroTime(T0)).toBe('2026-09-07T09:00:00.123000Z');
    expect(formatMicroTime(Date.UTC(2026, 0, 1))).toBe('2026-01-01T00:00:00.000000Z');
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 253_402_300_799_999 }), (ms) => {
        const text = formatMicroTime(ms);
        expect(text).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
        expect(parseMicroTime(text)).toBe(ms);
      }),
    );
  });

  it('parses what the API server returns, truncating below the millisecond, honouring offsets', () => {
    expect(parseMicroTime('2026-09-07T09:00:00.123456Z')).toBe(T0);
    expect(parseMicroTime('2026-09-07T11:00:00.123000+02:00')).toBe(T0);
    expect(parseMicroTime('2026-09-07T09:00:00Z')).toBe(T0 - 123);
    expect(() => parseMicroTime('yesterday')).toThrow('invalid MicroTime');
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

describe('ownership', () => {
  const key = { namespace: 'a', name: 'b' };
  it('accepts only our objects for the key asked for', () => {
    const lease = newLease(leaseObjectName(key), 'ns', record(key));
    expect(ownershipProblem(lease, key)).toBeUndefined();
    expect(ownershipProblem(lease, { namespace: 'a', name: 'c' })).toMatch('object name collision');
    delete lease.metadata.labels![MANAGED_BY_LABEL];
    expect(ownershipProblem(lease, key)).toMatch('is not labelled berth.skaphos.io/managed-by=berth');
  });
});
