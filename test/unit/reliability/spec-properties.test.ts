// Bad input: BerthLease specs as a client could send them. The reconciler only validates specs that
// passed the schema (parseBerthLease), so any JSON either gets a clear schema error there or validateSpec
// answers undefined or one of the SpecError messages without throwing; on well-typed specs validateSpec
// agrees with an independent reading of the docs/behaviour.md §1.2 rules. (validateSpec itself is not total over raw JSON:
// `{"heartbeatIntervalSeconds": {"toString": 0}}` makes its `<=` throw; the schema keeps that out.)
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SpecError, type SpecInput, validateSpec } from '../../../src/berth/api.ts';
import { parseBerthLease } from '../../../src/berth/leaseio.ts';

const RUNS = Number(process.env.PROPERTY_RUNS ?? 2000);
const MESSAGES = new Set<string>(Object.values(SpecError));

// Specs arrive as JSON (client-node parses the API server's answer), so every input is what JSON.parse
// can produce: any JSON value, including objects whose own keys are `__proto__` or `constructor`.
const fromJson = <T>(value: T): T => JSON.parse(JSON.stringify(value) ?? 'null') as T;
const json = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc
    .tuple(fc.jsonValue({ maxDepth: 2 }), fc.jsonValue({ maxDepth: 1 }))
    .map(
      ([a, b]) =>
        JSON.parse(`{"__proto__":${JSON.stringify(a)},"constructor":${JSON.stringify(b)}}`) as unknown,
    ),
);
const field = <T>(plausible: fc.Arbitrary<T>) =>
  fc.oneof({ arbitrary: plausible, weight: 3 }, { arbitrary: json, weight: 1 }, fc.constant(null));
const kinds = fc.constantFrom(
  { apiVersion: 'apps/v1', kind: 'Deployment' },
  { apiVersion: 'apps/v1', kind: 'StatefulSet' },
  { apiVersion: 'apps/v1', kind: 'ReplicaSet' },
  { apiVersion: 'batch/v1', kind: 'CronJob' },
  { apiVersion: 'apps/v1', kind: 'DaemonSet' },
  { apiVersion: 'batch/v1', kind: 'Job' },
  { apiVersion: 'v1', kind: 'Deployment' },
);
const int = fc.oneof(fc.integer({ min: -3, max: 120 }), fc.constantFrom(0, 1, Number.MAX_SAFE_INTEGER));
const action = fc.record(
  {
    scale: fc.oneof(fc.constant(null), fc.record({ replicas: int })),
    suspend: fc.oneof(fc.boolean(), fc.constant(null)),
  },
  { requiredKeys: [] },
);
const target = fc
  .record({ name: fc.constantFrom('', 'web', 'job-1') })
  .chain((t) => kinds.map((k) => ({ ...k, ...t })));

/** Well-typed specs: every field of its schema type, or missing. */
const typedSpec = fc.record(
  {
    leaseName: fc.constantFrom('', 'l1', 'demo'),
    holderIdentity: fc.constantFrom('', 'h1'),
    ttlSeconds: int,
    heartbeatIntervalSeconds: int,
    target,
    acquireAction: action,
    releaseAction: action,
  },
  { requiredKeys: [] },
);

const base = { leaseName: 'l1', holderIdentity: 'h1', ttlSeconds: 15, heartbeatIntervalSeconds: 5 };
const validSpecs = fc.constantFrom(
  base,
  {
    ...base,
    target: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' },
    acquireAction: { scale: { replicas: 2 } },
    releaseAction: { scale: { replicas: 0 } },
  },
  {
    ...base,
    target: { apiVersion: 'batch/v1', kind: 'CronJob', name: 'job-1' },
    acquireAction: { suspend: false },
    releaseAction: { suspend: true },
  },
);
/** Valid specs, and valid specs with one field replaced or removed: the rules' edges. */
const nearValidSpec = fc.oneof(
  validSpecs,
  fc
    .tuple(
      validSpecs,
      typedSpec,
      fc.constantFrom(
        ...(Object.keys(base) as (keyof typeof base)[]),
        'target',
        'acquireAction',
        'releaseAction',
      ),
    )
    .map(([valid, other, key]) => {
      const spec: Record<string, unknown> = { ...valid };
      if (key in other) spec[key] = (other as Record<string, unknown>)[key];
      else delete spec[key];
      return spec as typeof valid;
    }),
);

/** Spec-shaped input whose fields may be anything a client could send. */
const wildSpec = fc.record(
  {
    leaseName: field(fc.string()),
    holderIdentity: field(fc.string()),
    ttlSeconds: field(int),
    heartbeatIntervalSeconds: field(int),
    target: field(target),
    acquireAction: field(action),
    releaseAction: field(action),
    semantics: json,
  },
  { requiredKeys: [] },
);

type Action = { scale?: { replicas: number } | null; suspend?: boolean | null };
const present = (v: unknown): boolean => v !== undefined && v !== null;

/** The §1.2 rules, written out independently, in their order. */
function oracle(s: {
  leaseName?: string;
  holderIdentity?: string;
  ttlSeconds?: number;
  heartbeatIntervalSeconds?: number;
  target?: { apiVersion: string; kind: string; name: string };
  acquireAction?: Action;
  releaseAction?: Action;
}): string | undefined {
  if (s.leaseName === undefined || s.leaseName === '') return SpecError.leaseNameRequired;
  if (s.holderIdentity === undefined || s.holderIdentity === '') return SpecError.holderIdentityRequired;
  const ttl = s.ttlSeconds ?? 0;
  const hb = s.heartbeatIntervalSeconds ?? 0;
  if (!(ttl > 0)) return SpecError.ttlPositive;
  if (!(hb > 0)) return SpecError.heartbeatPositive;
  if (!(hb < ttl)) return SpecError.heartbeatBelowTtl;
  const t = s.target;
  const a = s.acquireAction;
  const r = s.releaseAction;
  if (t === undefined) return a !== undefined || r !== undefined ? SpecError.actionsRequireTarget : undefined;
  if (t.name === '') return SpecError.targetNameRequired;
  if (a === undefined || r === undefined) return SpecError.managedNeedsActions;
  const kind = `${t.apiVersion}/${t.kind}`;
  if (kind === 'batch/v1/CronJob')
    return a.suspend === false && !present(a.scale) && r.suspend === true && !present(r.scale)
      ? undefined
      : SpecError.cronJobActions;
  if (!['apps/v1/Deployment', 'apps/v1/StatefulSet', 'apps/v1/ReplicaSet'].includes(kind))
    return SpecError.unsupportedTarget;
  const ok =
    present(a.scale) &&
    (a.scale?.replicas ?? -1) >= 0 &&
    !present(a.suspend) &&
    present(r.scale) &&
    r.scale?.replicas === 0 &&
    !present(r.suspend);
  return ok ? undefined : SpecError.scalableActions;
}

describe('validateSpec properties', () => {
  it('any JSON spec gets a clear schema error or a validation answer, never a crash', () => {
    const outcomes = new Set<string>();
    fc.assert(
      fc.property(
        fc.oneof(wildSpec, typedSpec, nearValidSpec, fc.dictionary(fc.string(), json), fc.object(), json),
        (spec) => {
          const object = fromJson({
            apiVersion: 'berth.skaphos.io/v1alpha1',
            kind: 'BerthLease',
            metadata: { name: 'l1', namespace: 'ns' },
            // semantics is the schema's, not a §1.2 rule; a random one would keep the rules out of reach.
            spec:
              typeof spec === 'object' && spec !== null && !Array.isArray(spec) && !('semantics' in spec)
                ? { semantics: 'at-most-once', ...spec }
                : spec,
          });
          let lease: ReturnType<typeof parseBerthLease>;
          try {
            lease = parseBerthLease(object);
          } catch (err) {
            expect(err).toBeInstanceOf(Error);
            expect((err as Error).message).toMatch(/^BerthLease ns\/l1 does not match its schema: \S/);
            outcomes.add('schema error');
            return;
          }
          const result = validateSpec(lease.spec);
          outcomes.add(result === undefined ? 'valid' : 'invalid');
          expect(result === undefined || MESSAGES.has(result)).toBe(true);
        },
      ),
      { numRuns: RUNS },
    );
    // Both the schema and the rules are reached.
    expect([...outcomes].sort()).toEqual(['invalid', 'schema error', 'valid']);
  });

  it('agrees with the §1.2 rules on well-typed specs, reaching every outcome', () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(fc.oneof(typedSpec, nearValidSpec), (spec) => {
        const result = validateSpec(spec as SpecInput);
        seen.add(result ?? 'valid');
        expect(result).toBe(oracle(spec));
      }),
      { numRuns: RUNS },
    );
    // The generator is rich enough that every rule fires (so the agreement above means something).
    expect([...seen].sort()).toEqual([...MESSAGES, 'valid'].sort());
  });

  it('does not mutate its input', () => {
    fc.assert(
      fc.property(fc.oneof(typedSpec, nearValidSpec).map(fromJson), (spec) => {
        const before = JSON.stringify(spec);
        validateSpec(spec as SpecInput);
        expect(JSON.stringify(spec)).toBe(before);
      }),
      { numRuns: RUNS },
    );
  });
});
