import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { type CompiledSchema, compileSchema, goFloat, goValue } from '../../../src/sandbox/schema.ts';
import { type FieldCause, type JsonObject, type JsonValue, StatusError } from '../../../src/sandbox/types.ts';

// The BerthLease CRD schema (berth-spec.md §1), as controller-gen renders it.
const BERTHLEASE_SCHEMA = parse(String.raw`
type: object
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata: {type: object}
  spec:
    type: object
    required: [leaseName, holderIdentity, ttlSeconds, heartbeatIntervalSeconds, semantics]
    properties:
      leaseName: {type: string, maxLength: 253}
      holderIdentity: {type: string, maxLength: 253}
      ttlSeconds: {type: integer, format: int32}
      heartbeatIntervalSeconds: {type: integer, format: int32}
      semantics: {type: string, enum: [at-most-once, at-least-once]}
      target:
        type: object
        required: [apiVersion, kind, name]
        properties:
          apiVersion: {type: string, maxLength: 63}
          kind: {type: string, maxLength: 63}
          name: {type: string, maxLength: 253}
      acquireAction: &action
        type: object
        properties:
          suspend: {type: boolean}
          scale:
            type: object
            required: [replicas]
            properties:
              replicas: {type: integer, format: int32, minimum: 0}
        x-kubernetes-validations:
          - rule: '!(has(self.suspend) && has(self.scale))'
            message: at most one of suspend or scale may be set
      releaseAction: *action
    x-kubernetes-validations:
      - rule: self.leaseName == oldSelf.leaseName
        message: leaseName is immutable
      - rule: self.holderIdentity == oldSelf.holderIdentity
        message: holderIdentity is immutable
      - rule: has(self.target) == has(oldSelf.target) && (!has(self.target) || self.target == oldSelf.target)
        message: target is immutable
      - rule: has(self.releaseAction) == has(oldSelf.releaseAction) && (!has(self.releaseAction) || self.releaseAction == oldSelf.releaseAction)
        message: releaseAction is immutable
  status:
    type: object
    properties:
      workload:
        type: object
        required: [targetUID]
        properties:
          targetUID: {type: string}
          phase: {type: string, enum: ['', Active, Stopping]}
          deadline: {type: string, format: date-time}
          leaseName: {type: string}
          holder: {type: string}
          token: {type: integer, format: int32}
          pods:
            type: array
            maxItems: 1024
            items:
              type: object
              required: [name, uid]
              properties:
                name: {type: string}
                uid: {type: string}
            x-kubernetes-list-type: map
            x-kubernetes-list-map-keys: [uid]
      observedGeneration: {type: integer, format: int64, minimum: 0}
      leaseState: {type: string}
      currentHolder: {type: string}
      tenant: {type: string}
      acquiredAt: {type: string, format: date-time}
      expiresAt: {type: string, format: date-time}
      lastHeartbeat: {type: string, format: date-time}
      fencingToken: {type: integer, format: int32}
      conditions:
        type: array
        items:
          type: object
          required: [lastTransitionTime, message, reason, status, type]
          properties:
            lastTransitionTime: {type: string, format: date-time}
            message: {type: string, maxLength: 32768}
            observedGeneration: {type: integer, format: int64, minimum: 0}
            reason: {type: string, maxLength: 1024, minLength: 1, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'}
            status: {type: string, enum: ['True', 'False', Unknown]}
            type:
              type: string
              maxLength: 316
              pattern: '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$'
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [type]
`) as JsonObject;

const NOT_CHECKED: FieldCause = {
  reason: 'FieldValueInvalid',
  field: '<nil>',
  message:
    'Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
};

const berth = compileSchema(BERTHLEASE_SCHEMA);

// Fixture shapes: optional and widened where tests remove fields or put wrong types in.
interface Action {
  suspend?: boolean;
  scale?: { replicas?: number };
}
interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
  extra?: boolean;
}
interface Lease {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  spec: {
    leaseName?: string;
    holderIdentity?: string;
    ttlSeconds?: number | string;
    heartbeatIntervalSeconds?: number;
    semantics?: string;
    target?: { apiVersion?: string; kind?: string; name?: string; namespace?: string };
    acquireAction?: Action;
    releaseAction?: Action;
    replicas?: number;
  };
  status?: {
    observedGeneration?: number;
    leaseState?: string;
    currentHolder?: string;
    acquiredAt?: string;
    expiresAt?: string;
    fencingToken?: number;
    conditions: Condition[];
    workload: {
      targetUID: string;
      phase: string;
      deadline: string;
      leaseName: string;
      holder: string;
      token: number;
      pods: { name: string; uid: string }[];
    };
  };
  unknownTopLevel?: number;
}
type ManagedLease = Lease & { status: NonNullable<Lease['status']> };

const json = (l: Lease): JsonObject => l as unknown as JsonObject;

function lease(): Lease {
  return {
    apiVersion: 'berth.skaphos.io/v1alpha1',
    kind: 'BerthLease',
    metadata: { name: 'ingest', namespace: 'pipeline' },
    spec: {
      leaseName: 'ingest',
      holderIdentity: 'worker-east-1',
      ttlSeconds: 30,
      heartbeatIntervalSeconds: 10,
      semantics: 'at-most-once',
    },
  };
}

function managedLease(): ManagedLease {
  const l = lease();
  const target = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'ingest' };
  const status: ManagedLease['status'] = {
    observedGeneration: 3,
    leaseState: 'held',
    currentHolder: 'worker-east-1',
    acquiredAt: '2026-01-02T03:04:05Z',
    expiresAt: '2026-01-02T03:04:35Z',
    fencingToken: 7,
    conditions: [
      {
        type: 'Acquired',
        status: 'True',
        reason: 'Held',
        message: 'lease held with fencing token 7',
        lastTransitionTime: '2026-01-02T03:04:05Z',
        observedGeneration: 3,
      },
      {
        type: 'HeartbeatHealthy',
        status: 'True',
        reason: 'Heartbeating',
        message: 'lease renewed',
        lastTransitionTime: '2026-01-02T03:04:05Z',
      },
    ],
    workload: {
      targetUID: 'u-1',
      phase: 'Active',
      deadline: '2026-01-02T03:04:35Z',
      leaseName: 'ingest',
      holder: 'w',
      token: 7,
      pods: [
        { name: 'p1', uid: 'a' },
        { name: 'p2', uid: 'b' },
      ],
    },
  };
  return {
    ...l,
    spec: {
      ...l.spec,
      target,
      acquireAction: { scale: { replicas: 2 } },
      releaseAction: { scale: { replicas: 0 } },
    },
    status,
  };
}

const invalid = (field: string, message: string): FieldCause => ({
  reason: 'FieldValueInvalid',
  field,
  message,
});
const required = (field: string): FieldCause => ({
  reason: 'FieldValueRequired',
  field,
  message: 'Required value',
});
const typeInvalid = (field: string, message: string): FieldCause => ({
  reason: 'FieldValueTypeInvalid',
  field,
  message,
});

describe('BerthLease schema', () => {
  it('accepts a lease-only and a fully populated managed lease', () => {
    expect(berth.validate(json(lease()))).toEqual([]);
    expect(berth.validate(json(managedLease()))).toEqual([]);
    expect(berth.validate(json(managedLease()), json(managedLease()))).toEqual([]);
  });

  it('requires the five spec fields, and then skips CEL', () => {
    const l = lease();
    l.spec = {};
    expect(berth.validate(json(l))).toEqual([
      required('spec.leaseName'),
      required('spec.holderIdentity'),
      required('spec.ttlSeconds'),
      required('spec.heartbeatIntervalSeconds'),
      required('spec.semantics'),
      NOT_CHECKED,
    ]);
  });

  it('limits string lengths, with the TooLong wording of 1.32', () => {
    const l = managedLease();
    l.spec.leaseName = 'a'.repeat(254);
    l.spec.holderIdentity = 'h'.repeat(253);
    l.spec.target!.apiVersion = 'v'.repeat(64);
    expect(berth.validate(json(l))).toEqual([
      {
        reason: 'FieldValueTooLong',
        field: 'spec.leaseName',
        message: 'Too long: may not be more than 253 bytes',
      },
      {
        reason: 'FieldValueTooLong',
        field: 'spec.target.apiVersion',
        message: 'Too long: may not be more than 63 bytes',
      },
      NOT_CHECKED,
    ]);
  });

  it('rejects an unsupported semantics', () => {
    const l = lease();
    l.spec.semantics = 'exactly-once';
    expect(berth.validate(json(l))).toEqual([
      {
        reason: 'FieldValueNotSupported',
        field: 'spec.semantics',
        message: 'Unsupported value: "exactly-once": supported values: "at-most-once", "at-least-once"',
      },
      NOT_CHECKED,
    ]);
  });

  it('tells integers from strings and doubles (int32 format)', () => {
    const l = lease();
    l.spec.ttlSeconds = '30';
    l.spec.heartbeatIntervalSeconds = 1.5;
    expect(berth.validate(json(l))).toEqual([
      typeInvalid(
        'spec.ttlSeconds',
        'Invalid value: "string": spec.ttlSeconds in body must be of type integer: "string"',
      ),
      typeInvalid(
        'spec.heartbeatIntervalSeconds',
        'Invalid value: "float64": spec.heartbeatIntervalSeconds in body must be of type int32: "float64"',
      ),
      NOT_CHECKED,
    ]);
    l.spec.ttlSeconds = 2.0; // JSON 2.0 is an integer
    l.spec.heartbeatIntervalSeconds = 1;
    expect(berth.validate(json(l))).toEqual([]);
  });

  it('requires a complete target and a non-negative scale', () => {
    const l = managedLease();
    delete l.spec.target!.name;
    l.spec.acquireAction!.scale!.replicas = -1;
    l.spec.releaseAction!.scale = {};
    expect(berth.validate(json(l))).toEqual([
      required('spec.target.name'),
      invalid(
        'spec.acquireAction.scale.replicas',
        'Invalid value: -1: spec.acquireAction.scale.replicas in body should be greater than or equal to 0',
      ),
      required('spec.releaseAction.scale.replicas'),
      NOT_CHECKED,
    ]);
  });

  it('allows at most one of suspend or scale in each action', () => {
    const l = managedLease();
    l.spec.acquireAction = { suspend: false, scale: { replicas: 1 } };
    l.spec.releaseAction = { suspend: true, scale: { replicas: 0 } };
    expect(berth.validate(json(l))).toEqual([
      invalid('spec.acquireAction', 'Invalid value: "object": at most one of suspend or scale may be set'),
      invalid('spec.releaseAction', 'Invalid value: "object": at most one of suspend or scale may be set'),
    ]);
    l.spec.acquireAction = { suspend: false };
    l.spec.releaseAction = { suspend: true };
    expect(berth.validate(json(l))).toEqual([]);
  });

  it('skips transition rules on create', () => {
    const l = managedLease();
    expect(berth.validate(json(l))).toEqual([]);
  });

  it('makes leaseName and holderIdentity immutable', () => {
    const old = managedLease();
    const next = managedLease();
    next.spec.leaseName = 'other';
    next.spec.holderIdentity = 'someone-else';
    expect(berth.validate(json(next), json(old))).toEqual([
      invalid('spec', 'Invalid value: "object": leaseName is immutable'),
      invalid('spec', 'Invalid value: "object": holderIdentity is immutable'),
    ]);
  });

  it('makes target immutable in presence and value', () => {
    const withTarget = managedLease();
    const changed = managedLease();
    changed.spec.target!.name = 'another';
    const targetImmutable = [invalid('spec', 'Invalid value: "object": target is immutable')];
    expect(berth.validate(json(changed), json(withTarget))).toEqual(targetImmutable);
    const added = lease();
    added.spec.target = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'x' };
    expect(berth.validate(json(added), json(lease()))).toEqual(targetImmutable);
    const removed = managedLease();
    delete removed.spec.target;
    expect(berth.validate(json(removed), json(withTarget))).toEqual(targetImmutable);
  });

  it('makes releaseAction immutable in presence and value, but not acquireAction', () => {
    const old = managedLease();
    const scaled = managedLease();
    scaled.spec.acquireAction = { scale: { replicas: 5 } };
    scaled.spec.ttlSeconds = 60;
    expect(berth.validate(json(scaled), json(old))).toEqual([]);
    const releaseImmutable = [invalid('spec', 'Invalid value: "object": releaseAction is immutable')];
    const changed = managedLease();
    changed.spec.releaseAction = { suspend: true };
    expect(berth.validate(json(changed), json(old))).toEqual(releaseImmutable);
    const removed = managedLease();
    delete removed.spec.releaseAction;
    expect(berth.validate(json(removed), json(old))).toEqual(releaseImmutable);
    const added = lease();
    added.spec.releaseAction = { suspend: true };
    expect(berth.validate(json(added), json(lease()))).toEqual(releaseImmutable);
  });

  it('validates status: minimum, enums, patterns, date-times', () => {
    const l = managedLease();
    l.status.observedGeneration = -1;
    l.status.workload.phase = 'Paused';
    l.status.conditions[0]!.reason = 'not valid!';
    l.status.conditions[0]!.status = 'Maybe';
    l.status.conditions[1]!.lastTransitionTime = 'yesterday';
    expect(berth.validate(json(l))).toEqual([
      {
        reason: 'FieldValueNotSupported',
        field: 'status.workload.phase',
        message: 'Unsupported value: "Paused": supported values: "", "Active", "Stopping"',
      },
      invalid(
        'status.observedGeneration',
        'Invalid value: -1: status.observedGeneration in body should be greater than or equal to 0',
      ),
      invalid(
        'status.conditions[0].reason',
        `Invalid value: "not valid!": status.conditions[0].reason in body should match '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'`,
      ),
      {
        reason: 'FieldValueNotSupported',
        field: 'status.conditions[0].status',
        message: 'Unsupported value: "Maybe": supported values: "True", "False", "Unknown"',
      },
      typeInvalid(
        'status.conditions[1].lastTransitionTime',
        'Invalid value: "yesterday": status.conditions[1].lastTransitionTime in body must be of type date-time: "yesterday"',
      ),
      NOT_CHECKED,
    ]);
  });

  it('reports duplicate list-map keys of conditions and pods', () => {
    const l = managedLease();
    l.status.conditions[1]!.type = 'Acquired';
    l.status.workload.pods.push({ name: 'p3', uid: 'a' });
    expect(berth.validate(json(l))).toEqual([
      {
        reason: 'FieldValueDuplicate',
        field: 'status.conditions[1]',
        message: 'Duplicate value: map[string]interface {}{"type":"Acquired"}',
      },
      {
        reason: 'FieldValueDuplicate',
        field: 'status.workload.pods[2]',
        message: 'Duplicate value: map[string]interface {}{"uid":"a"}',
      },
    ]);
  });

  it('caps registered pods at 1024', () => {
    const l = managedLease();
    l.status.workload.pods = Array.from({ length: 1025 }, (_, i) => ({ name: `p${i}`, uid: `u${i}` }));
    expect(berth.validate(json(l))).toEqual([
      {
        reason: 'FieldValueTooMany',
        field: 'status.workload.pods',
        message: 'Too many: 1025: must have at most 1024 items',
      },
      NOT_CHECKED,
    ]);
  });

  it('prunes unknown fields and reports their paths, keeping root metadata', () => {
    const l = managedLease();
    l.spec.replicas = 3;
    l.spec.target!.namespace = 'x';
    l.status.conditions[0]!.extra = true;
    l.metadata.labels = { a: 'b' };
    l.unknownTopLevel = 1;
    expect(berth.prune(json(l))).toEqual([
      'spec.replicas',
      'spec.target.namespace',
      'status.conditions[0].extra',
      'unknownTopLevel',
    ]);
    expect(l).toEqual({
      ...managedLease(),
      metadata: { name: 'ingest', namespace: 'pipeline', labels: { a: 'b' } },
    });
  });

  it('applies no defaults (the schema declares none)', () => {
    const l = managedLease();
    berth.applyDefaults(json(l));
    expect(l).toEqual(managedLease());
  });

  it('ratchets unchanged invalid values on update', () => {
    const old = managedLease();
    old.status.observedGeneration = -1;
    const next = managedLease();
    next.status.observedGeneration = -1;
    next.spec.ttlSeconds = 45;
    expect(berth.validate(json(next), json(old))).toEqual([]);
    next.status.observedGeneration = -2;
    expect(berth.validate(json(next), json(old))).toEqual([
      invalid(
        'status.observedGeneration',
        'Invalid value: -2: status.observedGeneration in body should be greater than or equal to 0',
      ),
    ]);
  });
});

/** Compiles `{type: object, properties: {spec: <spec>}}`. */
const specSchema = (spec: JsonObject): CompiledSchema =>
  compileSchema({ type: 'object', properties: { spec } });
const obj = (spec: JsonValue): JsonObject => ({
  apiVersion: 'x/v1',
  kind: 'X',
  metadata: { name: 'n' },
  spec,
});

describe('OpenAPI value validation', () => {
  it('checks types, naming the type it found', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        b: { type: 'boolean' },
        o: { type: 'object' },
        a: { type: 'array', items: { type: 'string' } },
        n: { type: 'number' },
      },
    });
    expect(s.validate(obj({ b: 'true', o: [], a: {}, n: '1' }))).toEqual([
      typeInvalid('spec.b', 'Invalid value: "string": spec.b in body must be of type boolean: "string"'),
      typeInvalid('spec.o', 'Invalid value: "array": spec.o in body must be of type object: "array"'),
      typeInvalid('spec.a', 'Invalid value: "object": spec.a in body must be of type array: "object"'),
      typeInvalid('spec.n', 'Invalid value: "string": spec.n in body must be of type number: "string"'),
      NOT_CHECKED,
    ]);
  });

  it('accepts integers for number but not doubles for integer', () => {
    const s = specSchema({ type: 'object', properties: { n: { type: 'number' }, i: { type: 'integer' } } });
    expect(s.validate(obj({ n: 1, i: 2 }))).toEqual([]);
    expect(s.validate(obj({ n: 1.5, i: 2.5 }))).toEqual([
      typeInvalid('spec.i', 'Invalid value: "number": spec.i in body must be of type integer: "number"'),
      NOT_CHECKED,
    ]);
  });

  it('handles x-kubernetes-int-or-string and nullable', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        port: { 'x-kubernetes-int-or-string': true },
        note: { type: 'string', nullable: true },
        name: { type: 'string' },
      },
    });
    expect(s.validate(obj({ port: 8080, note: null, name: 'a' }))).toEqual([]);
    expect(s.validate(obj({ port: 'http' }))).toEqual([]);
    expect(s.validate(obj({ port: true, name: null }))).toEqual([
      typeInvalid(
        'spec.port',
        'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"',
      ),
      typeInvalid('spec.name', 'Invalid value: "null": spec.name in body must be of type string: "null"'),
      NOT_CHECKED,
    ]);
  });

  it('checks string lengths in characters, patterns and formats', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        short: { type: 'string', minLength: 3 },
        emoji: { type: 'string', maxLength: 2 },
        id: { type: 'string', pattern: '^[a-z]+$' },
        uid: { type: 'string', format: 'uuid' },
        day: { type: 'string', format: 'date' },
        wait: { type: 'string', format: 'duration' },
        any: { type: 'string', format: 'no-such-format' },
      },
    });
    const good = {
      short: 'abc',
      emoji: '😀😀',
      id: 'abc',
      uid: 'F81D4FAE-7DEC-11D0-A765-00A0C91E6BF6',
      day: '2024-02-29',
      wait: '1h30m',
      any: '?',
    };
    expect(s.validate(obj(good))).toEqual([]);
    expect(
      s.validate(
        obj({ short: 'ab', emoji: '😀😀😀', id: 'A1', uid: 'nope', day: '2023-02-29', wait: 'soon' }),
      ),
    ).toEqual([
      invalid('spec.short', 'Invalid value: "ab": spec.short in body should be at least 3 chars long'),
      { reason: 'FieldValueTooLong', field: 'spec.emoji', message: 'Too long: may not be more than 2 bytes' },
      invalid('spec.id', `Invalid value: "A1": spec.id in body should match '^[a-z]+$'`),
      typeInvalid('spec.uid', 'Invalid value: "nope": spec.uid in body must be of type uuid: "nope"'),
      typeInvalid(
        'spec.day',
        'Invalid value: "2023-02-29": spec.day in body must be of type date: "2023-02-29"',
      ),
      typeInvalid('spec.wait', 'Invalid value: "soon": spec.wait in body must be of type duration: "soon"'),
      NOT_CHECKED,
    ]);
  });

  it('reads RE2 patterns: inline flags and POSIX classes', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        a: { type: 'string', pattern: '(?i)^[[:alpha:]]+-x$' },
        b: { type: 'string', pattern: '\\Ab\\z' },
      },
    });
    expect(s.validate(obj({ a: 'Abc-X', b: 'b' }))).toEqual([]);
    expect(s.validate(obj({ a: 'Ab1-X', b: 'bb' }))).toEqual([
      invalid('spec.a', `Invalid value: "Ab1-X": spec.a in body should match '(?i)^[[:alpha:]]+-x$'`),
      invalid('spec.b', `Invalid value: "bb": spec.b in body should match '\\Ab\\z'`),
    ]);
  });

  it('checks numeric bounds and multipleOf, printing Go-style numbers', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        lo: { type: 'integer', minimum: 1 },
        hi: { type: 'integer', maximum: 10, exclusiveMaximum: true },
        gt: { type: 'number', minimum: 0.5, exclusiveMinimum: true },
        le: { type: 'number', maximum: 2.5 },
        step: { type: 'integer', multipleOf: 5 },
        frac: { type: 'number', multipleOf: 0.25 },
      },
    });
    expect(s.validate(obj({ lo: 1, hi: 9, gt: 0.75, le: 2.5, step: 15, frac: 1.75 }))).toEqual([]);
    expect(s.validate(obj({ lo: 0, hi: 10, gt: 0.5, le: 2500000.5, step: 7, frac: 0.3 }))).toEqual([
      invalid('spec.lo', 'Invalid value: 0: spec.lo in body should be greater than or equal to 1'),
      invalid('spec.hi', 'Invalid value: 10: spec.hi in body should be less than 10'),
      invalid('spec.gt', 'Invalid value: 0.5: spec.gt in body should be greater than 0.5'),
      invalid('spec.le', 'Invalid value: 2.5000005e+06: spec.le in body should be less than or equal to 2.5'),
      invalid('spec.step', 'Invalid value: 7: spec.step in body should be a multiple of 5'),
      invalid('spec.frac', 'Invalid value: 0.3: spec.frac in body should be a multiple of 0.25'),
    ]);
  });

  it('checks item and property counts, uniqueness and enums of any type', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        few: { type: 'array', minItems: 2, items: { type: 'integer' } },
        many: { type: 'array', maxItems: 1, items: { type: 'integer' } },
        uniq: { type: 'array', uniqueItems: true, items: { type: 'integer' } },
        props: { type: 'object', minProperties: 2, additionalProperties: { type: 'string' } },
        cap: { type: 'object', maxProperties: 1, additionalProperties: { type: 'string' } },
        level: { type: 'integer', enum: [1, 2] },
      },
    });
    expect(
      s.validate(obj({ few: [1, 2], many: [1], uniq: [1, 2], props: { a: 'x', b: 'y' }, cap: {}, level: 2 })),
    ).toEqual([]);
    expect(
      s.validate(
        obj({ few: [1], many: [1, 2], uniq: [1, 1], props: { a: 'x' }, cap: { a: 'x', b: 'y' }, level: 3 }),
      ),
    ).toEqual([
      invalid('spec.few', 'Invalid value: 1: spec.few in body should have at least 2 items'),
      { reason: 'FieldValueTooMany', field: 'spec.many', message: 'Too many: 2: must have at most 1 items' },
      invalid('spec.uniq', `Invalid value: "": spec.uniq in body shouldn't contain duplicates`),
      invalid('spec.props', 'Invalid value: 1: spec.props in body should have at least 2 properties'),
      { reason: 'FieldValueTooMany', field: 'spec.cap', message: 'Too many: 2: must have at most 1 items' },
      {
        reason: 'FieldValueNotSupported',
        field: 'spec.level',
        message: 'Unsupported value: 3: supported values: "1", "2"',
      },
      NOT_CHECKED,
    ]);
  });

  it('validates additionalProperties values under dotted map-key paths', () => {
    const s = specSchema({
      type: 'object',
      properties: { labels: { type: 'object', additionalProperties: { type: 'string', maxLength: 3 } } },
    });
    expect(s.validate(obj({ labels: { app: 'web', tier: 'backend' } }))).toEqual([
      {
        reason: 'FieldValueTooLong',
        field: 'spec.labels.tier',
        message: 'Too long: may not be more than 3 bytes',
      },
      NOT_CHECKED,
    ]);
  });

  it('reports duplicates in list-type=set and multi-key list-type=map', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        tags: { type: 'array', items: { type: 'string' }, 'x-kubernetes-list-type': 'set' },
        ports: {
          type: 'array',
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['name', 'port'],
          items: {
            type: 'object',
            required: ['name', 'port'],
            properties: { name: { type: 'string' }, port: { type: 'integer' } },
          },
        },
      },
    });
    const spec = {
      tags: ['a', 'b', 'a', 'a'],
      ports: [
        { name: 'http', port: 80 },
        { name: 'http', port: 8080 },
        { port: 80, name: 'http' },
      ],
    };
    expect(s.validate(obj(spec))).toEqual([
      { reason: 'FieldValueDuplicate', field: 'spec.tags[2]', message: 'Duplicate value: "a"' },
      {
        reason: 'FieldValueDuplicate',
        field: 'spec.ports[2]',
        message: 'Duplicate value: map[string]interface {}{"name":"http", "port":80}',
      },
    ]);
  });
});

describe('defaulting and pruning', () => {
  const s = specSchema({
    type: 'object',
    properties: {
      replicas: { type: 'integer', default: 1 },
      mode: { type: 'string', default: 'auto' },
      note: { type: 'string', nullable: true, default: 'n' },
      strategy: { type: 'object', properties: { kind: { type: 'string', default: 'Rolling' } } },
      ports: {
        type: 'array',
        items: {
          type: 'object',
          properties: { protocol: { type: 'string', default: 'TCP' }, port: { type: 'integer' } },
        },
      },
      env: {
        type: 'object',
        additionalProperties: { type: 'object', properties: { value: { type: 'string', default: '' } } },
      },
      drop: { type: 'string' },
      blob: {
        type: 'object',
        'x-kubernetes-preserve-unknown-fields': true,
        properties: { known: { type: 'object', properties: { a: { type: 'string' } } } },
      },
      raw: {
        type: 'object',
        'x-kubernetes-embedded-resource': true,
        'x-kubernetes-preserve-unknown-fields': true,
      },
      typed: {
        type: 'object',
        'x-kubernetes-embedded-resource': true,
        properties: { spec: { type: 'object', properties: { x: { type: 'string' } } } },
      },
    },
  });

  it('defaults absent and non-nullable null fields, only inside present objects', () => {
    const o = obj({
      mode: null,
      note: null,
      ports: [{ port: 80 }, { port: 81, protocol: 'UDP' }],
      env: { A: {} },
      drop: null,
    });
    s.applyDefaults(o);
    expect(o.spec).toEqual({
      replicas: 1,
      mode: 'auto',
      note: null,
      ports: [
        { port: 80, protocol: 'TCP' },
        { port: 81, protocol: 'UDP' },
      ],
      env: { A: { value: '' } },
    });
    const empty = obj({ strategy: {} });
    s.applyDefaults(empty);
    expect(empty.spec).toEqual({ replicas: 1, mode: 'auto', note: 'n', strategy: { kind: 'Rolling' } });
    const none: JsonObject = { apiVersion: 'x/v1', kind: 'X', metadata: {} };
    s.applyDefaults(none);
    expect(none).toEqual({ apiVersion: 'x/v1', kind: 'X', metadata: {} });
  });

  it('copies defaults rather than sharing them', () => {
    const d = specSchema({
      type: 'object',
      properties: { tags: { type: 'array', items: { type: 'string' }, default: ['a'] } },
    });
    const a = obj({});
    const b = obj({});
    d.applyDefaults(a);
    d.applyDefaults(b);
    ((a.spec as JsonObject).tags as string[]).push('b');
    expect((b.spec as JsonObject).tags).toEqual(['a']);
  });

  it('keeps preserve-unknown-fields and embedded-resource metadata but prunes below declared properties', () => {
    const o = obj({
      unknown: 1,
      blob: { anything: { goes: true }, known: { a: 'x', b: 'pruned' } },
      raw: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { free: 1 } },
      typed: {
        apiVersion: 'v1',
        kind: 'Thing',
        metadata: { name: 't', odd: 1 },
        spec: { x: 'a', y: 'b' },
        extra: 1,
      },
      ports: [{ port: 1, junk: 2 }],
      env: { A: { value: 'v', junk: 1 } },
    });
    expect(s.prune(o)).toEqual([
      'spec.blob.known.b',
      'spec.env.A.junk',
      'spec.ports[0].junk',
      'spec.typed.extra',
      'spec.typed.spec.y',
      'spec.unknown',
    ]);
    expect(o.spec).toEqual({
      blob: { anything: { goes: true }, known: { a: 'x' } },
      raw: { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { free: 1 } },
      typed: { apiVersion: 'v1', kind: 'Thing', metadata: { name: 't', odd: 1 }, spec: { x: 'a' } },
      ports: [{ port: 1 }],
      env: { A: { value: 'v' } },
    });
  });
});

describe('CEL x-kubernetes-validations', () => {
  it('exposes integers as int and numbers as double', () => {
    const s = specSchema({
      type: 'object',
      properties: { count: { type: 'integer' }, ratio: { type: 'number' } },
      'x-kubernetes-validations': [
        { rule: 'type(self.count) == int && self.count + 1 == 3' },
        { rule: 'type(self.ratio) == double && self.ratio * 2.0 == 3.0' },
        { rule: 'self.count / 2 == 1' },
      ],
    });
    expect(s.validate(obj({ count: 2, ratio: 1.5 }))).toEqual([]);
    // A whole-number JSON value in a number field is still a double.
    expect(s.validate(obj({ count: 3, ratio: 2 }))).toEqual([
      invalid('spec', 'Invalid value: "object": failed rule: type(self.count) == int && self.count + 1 == 3'),
      invalid(
        'spec',
        'Invalid value: "object": failed rule: type(self.ratio) == double && self.ratio * 2.0 == 3.0',
      ),
    ]);
  });

  it('supports messageExpression, reason and fieldPath', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        min: { type: 'integer' },
        max: { type: 'integer' },
        m: { type: 'object', additionalProperties: { type: 'string' } },
      },
      'x-kubernetes-validations': [
        {
          rule: 'self.min <= self.max',
          messageExpression: "'min ' + string(self.min) + ' exceeds max ' + string(self.max)",
          fieldPath: '.min',
        },
        { rule: 'self.min != 7', message: 'seven is forbidden', reason: 'FieldValueForbidden' },
        {
          rule: "!('x' in self.m)",
          message: 'x must not be set',
          reason: 'FieldValueRequired',
          fieldPath: ".m['x']",
        },
        { rule: 'self.min != 8', reason: 'FieldValueDuplicate' },
        { rule: 'self.max != 9', message: ' fallback ', messageExpression: "self.max == 9 ? '' : 'unused'" },
      ],
    });
    expect(s.validate(obj({ min: 1, max: 2, m: {} }))).toEqual([]);
    expect(s.validate(obj({ min: 7, max: 2, m: { x: 'y' } }))).toEqual([
      invalid('spec.min', 'Invalid value: "object": min 7 exceeds max 2'),
      { reason: 'FieldValueForbidden', field: 'spec', message: 'Forbidden: seven is forbidden' },
      { reason: 'FieldValueRequired', field: 'spec.m[x]', message: 'Required value: x must not be set' },
    ]);
    expect(s.validate(obj({ min: 8, max: 9, m: {} }))).toEqual([
      { reason: 'FieldValueDuplicate', field: 'spec', message: 'Duplicate value: "object"' },
      invalid('spec', 'Invalid value: "object": fallback'),
    ]);
  });

  it('reports evaluation errors with the rule, and renders the value as the schema type', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        opt: { type: 'object', properties: { name: { type: 'string' } } },
        name: {
          type: 'string',
          'x-kubernetes-validations': [{ rule: 'self.size() < 3', message: 'name too long' }],
        },
        list: {
          type: 'array',
          items: { type: 'integer' },
          'x-kubernetes-validations': [{ rule: 'self[2] > 0' }],
        },
      },
      'x-kubernetes-validations': [{ rule: "self.opt.name == 'x'" }],
    });
    expect(s.validate(obj({ name: 'abcd', list: [1] }))).toEqual([
      invalid('spec', `Invalid value: "object": no such key: opt evaluating rule: self.opt.name == 'x'`),
      invalid('spec.name', 'Invalid value: "string": name too long'),
      invalid(
        'spec.list',
        `Invalid value: "array": index '2' out of range in list size '1' evaluating rule: self[2] > 0`,
      ),
    ]);
  });

  it('reports root rules at <nil> and sees apiVersion, kind and metadata.name', () => {
    const s = compileSchema({
      type: 'object',
      properties: { spec: { type: 'object', properties: { a: { type: 'string' } } } },
      'x-kubernetes-validations': [
        { rule: "self.kind == 'X' && self.metadata.name.startsWith('ok-')", message: 'bad name' },
      ],
    });
    expect(s.validate({ apiVersion: 'x/v1', kind: 'X', metadata: { name: 'ok-1' } })).toEqual([]);
    expect(s.validate({ apiVersion: 'x/v1', kind: 'X', metadata: { name: 'no' } })).toEqual([
      invalid('<nil>', 'Invalid value: "object": bad name'),
    ]);
  });

  it('escapes property names that are not CEL identifiers', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        'max-size': { type: 'integer' },
        namespace: { type: 'string' },
        'a.b': { type: 'string' },
        x__y: { type: 'string' },
      },
      'x-kubernetes-validations': [
        {
          rule: "self.max__dash__size > 0 && self.__namespace__ == 'ns' && self.a__dot__b == 'ab' && self.x__underscores__y == 'xy'",
        },
      ],
    });
    expect(s.validate(obj({ 'max-size': 1, namespace: 'ns', 'a.b': 'ab', x__y: 'xy' }))).toEqual([]);
    expect(s.validate(obj({ 'max-size': 0, namespace: 'ns', 'a.b': 'ab', x__y: 'xy' }))).toHaveLength(1);
  });

  it('exposes date-time, duration and byte strings as timestamp, duration and bytes', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        at: { type: 'string', format: 'date-time' },
        every: { type: 'string', format: 'duration' },
        data: { type: 'string', format: 'byte' },
      },
      'x-kubernetes-validations': [
        { rule: "self.at > timestamp('2024-01-01T00:00:00Z')", message: 'too early' },
        { rule: "self.every <= duration('1h')", message: 'too slow' },
        { rule: "self.data == b'hi'", message: 'wrong data' },
      ],
    });
    expect(s.validate(obj({ at: '2025-06-01T10:00:00Z', every: '30m', data: 'aGk=' }))).toEqual([]);
    expect(s.validate(obj({ at: '2023-06-01T10:00:00Z', every: '2h', data: 'aGo=' }))).toEqual([
      invalid('spec', 'Invalid value: "object": too early'),
      invalid('spec', 'Invalid value: "object": too slow'),
      invalid('spec', 'Invalid value: "object": wrong data'),
    ]);
  });

  it('type-checks int-or-string as dyn', () => {
    const s = specSchema({
      type: 'object',
      properties: { surge: { 'x-kubernetes-int-or-string': true } },
      'x-kubernetes-validations': [
        {
          rule: "type(self.surge) == string ? self.surge.endsWith('%') : self.surge <= 10",
          message: 'bad surge',
        },
      ],
    });
    expect(s.validate(obj({ surge: 5 }))).toEqual([]);
    expect(s.validate(obj({ surge: '25%' }))).toEqual([]);
    expect(s.validate(obj({ surge: 11 }))).toEqual([invalid('spec', 'Invalid value: "object": bad surge')]);
    expect(s.validate(obj({ surge: '25' }))).toEqual([invalid('spec', 'Invalid value: "object": bad surge')]);
    const unguarded = specSchema({
      type: 'object',
      properties: { surge: { 'x-kubernetes-int-or-string': true } },
      'x-kubernetes-validations': [{ rule: 'self.surge <= 10' }],
    });
    expect(unguarded.validate(obj({ surge: '25%' }))).toEqual([
      invalid(
        'spec',
        `Invalid value: "object": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self.surge <= 10`,
      ),
    ]);
  });

  it('correlates list-type=map items by key for transition rules', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        items: {
          type: 'array',
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['name'],
          items: {
            type: 'object',
            required: ['name'],
            properties: { name: { type: 'string' }, size: { type: 'integer' } },
            'x-kubernetes-validations': [{ rule: 'self.size >= oldSelf.size', message: 'cannot shrink' }],
          },
        },
      },
    });
    const old = obj({
      items: [
        { name: 'a', size: 5 },
        { name: 'b', size: 5 },
      ],
    });
    expect(
      s.validate(
        obj({
          items: [
            { name: 'b', size: 6 },
            { name: 'a', size: 5 },
            { name: 'c', size: 1 },
          ],
        }),
        old,
      ),
    ).toEqual([]);
    expect(
      s.validate(
        obj({
          items: [
            { name: 'b', size: 6 },
            { name: 'a', size: 4 },
          ],
        }),
        old,
      ),
    ).toEqual([invalid('spec.items[1]', 'Invalid value: "object": cannot shrink')]);
  });

  it('honours optionalOldSelf on create and update', () => {
    const s = specSchema({
      type: 'object',
      properties: { v: { type: 'integer' } },
      'x-kubernetes-validations': [
        {
          rule: '!oldSelf.hasValue() ? self.v == 1 : self.v > oldSelf.value().v',
          message: 'start at 1, then grow',
          optionalOldSelf: true,
        },
      ],
    });
    expect(s.validate(obj({ v: 1 }))).toEqual([]);
    expect(s.validate(obj({ v: 2 }))).toEqual([
      invalid('spec', 'Invalid value: "object": start at 1, then grow'),
    ]);
    expect(s.validate(obj({ v: 3 }), obj({ v: 2 }))).toEqual([]);
    expect(s.validate(obj({ v: 2 }), obj({ v: 2 }))).toEqual([
      invalid('spec', 'Invalid value: "object": start at 1, then grow'),
    ]);
  });

  it('ratchets non-transition rules on unchanged values only', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        a: { type: 'integer', 'x-kubernetes-validations': [{ rule: 'self < 10', message: 'a too big' }] },
        b: { type: 'integer' },
      },
    });
    expect(s.validate(obj({ a: 11, b: 2 }), obj({ a: 11, b: 1 }))).toEqual([]);
    expect(s.validate(obj({ a: 12, b: 1 }), obj({ a: 11, b: 1 }))).toEqual([
      invalid('spec.a', 'Invalid value: "integer": a too big'),
    ]);
  });

  it('registers the Kubernetes libraries (lists, sets, strings, regex, url, quantity, ip, cidr)', () => {
    const s = specSchema({
      type: 'object',
      properties: {
        nums: { type: 'array', items: { type: 'integer' } },
        url: { type: 'string' },
        mem: { type: 'string' },
        cidr: { type: 'string' },
        text: { type: 'string' },
      },
      'x-kubernetes-validations': [
        {
          rule: 'self.nums.isSorted() && self.nums.sum() == 6 && self.nums.min() == 1 && self.nums.max() == 3 && self.nums.indexOf(2) == 1',
          message: 'lists',
        },
        {
          rule: 'sets.contains(self.nums, [1, 2]) && sets.intersects(self.nums, [3, 4]) && !sets.equivalent(self.nums, [1])',
          message: 'sets',
        },
        {
          rule: "self.text.charAt(0) == 'h' && self.text.replace('l', 'L') == 'heLLo' && self.text.find('l+') == 'll' && self.text.findAll('[aeiou]') == ['e', 'o']",
          message: 'strings',
        },
        {
          rule: "isURL(self.url) && url(self.url).getHostname() == 'example.com' && url(self.url).getPort() == '8443' && url(self.url).getQuery()['a'] == ['1']",
          message: 'url',
        },
        {
          rule: "isQuantity(self.mem) && quantity(self.mem).isGreaterThan(quantity('1Gi')) && quantity(self.mem).add(quantity('512Mi')).compareTo(quantity('2Gi')) == 0",
          message: 'quantity',
        },
        {
          rule: "isCIDR(self.cidr) && cidr(self.cidr).containsIP(ip('10.1.2.3')) && !cidr(self.cidr).containsIP('11.0.0.1') && ip('::1').isLoopback()",
          message: 'net',
        },
      ],
    });
    const good = {
      nums: [1, 2, 3],
      url: 'https://example.com:8443/p?a=1',
      mem: '1536Mi',
      cidr: '10.0.0.0/8',
      text: 'hello',
    };
    expect(s.validate(obj(good))).toEqual([]);
    const bad = { nums: [3, 1], url: 'not a url', mem: '1Gi', cidr: '192.168.0.0/16', text: 'world' };
    expect(s.validate(obj(bad)).map((c) => c.message)).toEqual([
      'Invalid value: "object": lists',
      'Invalid value: "object": sets',
      'Invalid value: "object": strings',
      'Invalid value: "object": url',
      'Invalid value: "object": quantity',
      'Invalid value: "object": net',
    ]);
  });
});

describe('compiling rules', () => {
  const compileError = (spec: JsonObject, options?: { basePath?: string; crdName?: string }): StatusError => {
    try {
      compileSchema({ type: 'object', properties: { spec } }, options);
    } catch (err) {
      if (err instanceof StatusError) return err;
      throw err;
    }
    throw new Error('expected the schema not to compile');
  };
  const rulePath = 'spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]';
  const ruleStruct = (rule: string): string =>
    `apiextensions.ValidationRule{Rule:${JSON.stringify(rule)}, Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}`;

  it('rejects undefined fields, including inside has()', () => {
    const err = compileError(
      {
        type: 'object',
        properties: { a: { type: 'string' } },
        'x-kubernetes-validations': [{ rule: 'self.nonExistingField > 0' }, { rule: 'has(self.b)' }],
      },
      { crdName: 'things.example.com' },
    );
    expect(err.code).toBe(422);
    expect(err.details?.causes).toEqual([
      invalid(
        `${rulePath}.rule`,
        `Invalid value: ${ruleStruct('self.nonExistingField > 0')}: compilation failed: ERROR: <input>:1:5: undefined field 'nonExistingField'\n | self.nonExistingField > 0\n | ....^`,
      ),
      invalid(
        'spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule',
        `Invalid value: ${ruleStruct('has(self.b)')}: compilation failed: ERROR: <input>:1:4: undefined field 'b'\n | has(self.b)\n | ...^`,
      ),
    ]);
    expect(
      err.message.startsWith(
        'CustomResourceDefinition.apiextensions.k8s.io "things.example.com" is invalid: [',
      ),
    ).toBe(true);
  });

  it('type-checks operators and the result type', () => {
    const overload = compileError({
      type: 'object',
      properties: { n: { type: 'integer' } },
      'x-kubernetes-validations': [{ rule: 'self.n == true' }],
    });
    expect(overload.details?.causes).toEqual([
      invalid(
        `${rulePath}.rule`,
        `Invalid value: ${ruleStruct('self.n == true')}: compilation failed: ERROR: <input>:1:8: found no matching overload for '_==_' applied to '(int, bool)'\n | self.n == true\n | .......^`,
      ),
    ]);
    const notBool = compileError({ type: 'integer', 'x-kubernetes-validations': [{ rule: 'self + 1' }] });
    expect(notBool.details?.causes).toEqual([
      invalid(
        `${rulePath}.rule`,
        `Invalid value: ${ruleStruct('self + 1')}: cel expression must evaluate to a bool`,
      ),
    ]);
  });

  it('names the path of the first uncorrelatable list for transition rules', () => {
    const err = compileError(
      {
        type: 'object',
        properties: {
          l: {
            type: 'array',
            items: { type: 'string', 'x-kubernetes-validations': [{ rule: 'self == oldSelf' }] },
          },
        },
      },
      { basePath: 'spec.versions[0].schema.openAPIV3Schema' },
    );
    expect(err.details?.causes).toEqual([
      invalid(
        'spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[l].items.x-kubernetes-validations[0].rule',
        'Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[l].items',
      ),
    ]);
  });

  it('rejects patterns that do not compile', () => {
    const err = compileError({ type: 'object', properties: { a: { type: 'string', pattern: '+' } } });
    expect(err.details?.causes).toEqual([
      invalid(
        'spec.validation.openAPIV3Schema.properties[spec].properties[a].pattern',
        'Invalid value: "+": must be a valid regular expression, but isn\'t: Invalid regular expression: /+/: Nothing to repeat',
      ),
    ]);
  });

  it('checks optionalOldSelf, fieldPath, messageExpression and empty rules', () => {
    const err = compileError({
      type: 'object',
      properties: { n: { type: 'integer' } },
      'x-kubernetes-validations': [
        { rule: 'self.n > 0', optionalOldSelf: false },
        { rule: 'self.n > 0', fieldPath: '.missing' },
        { rule: 'self.n > 0', messageExpression: 'self.n' },
        { rule: '  ' },
      ],
    });
    const at = (i: number, field: string) =>
      `spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[${i}].${field}`;
    expect(err.details?.causes).toEqual([
      invalid(
        at(0, 'optionalOldSelf'),
        'Invalid value: false: may not be set if oldSelf is not used in rule',
      ),
      invalid(at(1, 'fieldPath'), 'Invalid value: ".missing": fieldPath must be a valid path'),
      invalid(
        at(2, 'messageExpression'),
        'Invalid value: apiextensions.ValidationRule{Rule:"self.n > 0", Message:"", MessageExpression:"self.n", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: must evaluate to a string',
      ),
      {
        reason: 'FieldValueRequired',
        field: at(3, 'rule'),
        message: 'Required value: rule is not specified',
      },
    ]);
  });
});

describe('Go value rendering', () => {
  it('formats floats like strconv.FormatFloat(f, g, -1, 64)', () => {
    expect([0.5, 1e-5, 0.0001, 999999.5, 1234567.5, -2.5e21, 1e100].map(goFloat)).toEqual([
      '0.5',
      '1e-05',
      '0.0001',
      '999999.5',
      '1.2345675e+06',
      '-2.5e+21',
      '1e+100',
    ]);
  });

  it('quotes strings and prints compound values with %#v', () => {
    expect(goValue('a"b\n\u0001')).toBe('"a\\"b\\n\\x01"');
    expect(goValue(null)).toBe('"null"');
    expect(goValue(42)).toBe('42');
    expect(goValue({ b: [1, 'x'], a: null, c: true })).toBe(
      'map[string]interface {}{"a":interface {}(nil), "b":[]interface {}{1, "x"}, "c":true}',
    );
  });
});
