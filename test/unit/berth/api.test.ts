import { describe, expect, it } from 'vitest';
import {
  API_VERSION,
  berthLeaseSchema,
  berthLeaseSpecSchema,
  ConditionMessage,
  CRD_NAME,
  FINALIZER,
  holderFor,
  SpecError,
  type SpecInput,
  validateSpec,
} from '../../../src/berth/api.ts';

const base: SpecInput = {
  leaseName: 'ingest',
  holderIdentity: 'worker-east-1',
  ttlSeconds: 30,
  heartbeatIntervalSeconds: 10,
  semantics: 'at-most-once',
};
const deployment = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' };
const cronJob = { apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly' };
const scaleUp = { scale: { replicas: 3 } };
const scaleZero = { scale: { replicas: 0 } };

describe('constants', () => {
  it('match the Go originals', () => {
    expect(API_VERSION).toBe('berth.skaphos.io/v1alpha1');
    expect(CRD_NAME).toBe('berthleases.berth.skaphos.io');
    expect(FINALIZER).toBe('berth.skaphos.io/lease-release');
    expect(ConditionMessage.heldByOther('cluster-west')).toBe('lease held by "cluster-west"');
    expect(ConditionMessage.held(7)).toBe('lease held with fencing token 7');
  });
});

describe('validateSpec', () => {
  it('accepts the lease-only example and valid managed specs', () => {
    expect(validateSpec(base)).toBeUndefined();
    expect(
      validateSpec({ ...base, target: deployment, acquireAction: scaleUp, releaseAction: scaleZero }),
    ).toBeUndefined();
    expect(
      validateSpec({ ...base, target: deployment, acquireAction: scaleZero, releaseAction: scaleZero }),
    ).toBeUndefined();
    for (const kind of ['StatefulSet', 'ReplicaSet']) {
      expect(
        validateSpec({
          ...base,
          target: { ...deployment, kind },
          acquireAction: scaleUp,
          releaseAction: scaleZero,
        }),
      ).toBeUndefined();
    }
    expect(
      validateSpec({
        ...base,
        target: cronJob,
        acquireAction: { suspend: false },
        releaseAction: { suspend: true },
      }),
    ).toBeUndefined();
  });

  const cases: Array<[string, SpecInput, string]> = [
    ['1 leaseName empty', { ...base, leaseName: '' }, SpecError.leaseNameRequired],
    ['1 leaseName missing (before every other rule)', { ttlSeconds: 0 }, SpecError.leaseNameRequired],
    [
      '2 holderIdentity empty',
      { ...base, holderIdentity: '', ttlSeconds: 0 },
      SpecError.holderIdentityRequired,
    ],
    ['3 ttl zero', { ...base, ttlSeconds: 0, heartbeatIntervalSeconds: 0 }, SpecError.ttlPositive],
    ['3 ttl negative', { ...base, ttlSeconds: -1 }, SpecError.ttlPositive],
    ['4 heartbeat zero', { ...base, heartbeatIntervalSeconds: 0 }, SpecError.heartbeatPositive],
    ['4 heartbeat negative', { ...base, heartbeatIntervalSeconds: -5 }, SpecError.heartbeatPositive],
    ['5 heartbeat == ttl', { ...base, heartbeatIntervalSeconds: 30 }, SpecError.heartbeatBelowTtl],
    ['5 heartbeat > ttl', { ...base, heartbeatIntervalSeconds: 31 }, SpecError.heartbeatBelowTtl],
    ['6 acquire action without target', { ...base, acquireAction: scaleUp }, SpecError.actionsRequireTarget],
    [
      '6 release action without target',
      { ...base, releaseAction: scaleZero },
      SpecError.actionsRequireTarget,
    ],
    [
      '7 target without name (before the action rules)',
      { ...base, target: { ...deployment, name: '' } },
      SpecError.targetNameRequired,
    ],
    ['8 target without actions', { ...base, target: deployment }, SpecError.managedNeedsActions],
    [
      '8 target without releaseAction',
      { ...base, target: deployment, acquireAction: scaleUp },
      SpecError.managedNeedsActions,
    ],
    [
      '8 target without acquireAction (before the kind check)',
      { ...base, target: { apiVersion: 'v1', kind: 'Pod', name: 'p' }, releaseAction: scaleZero },
      SpecError.managedNeedsActions,
    ],
    [
      '9 CronJob with scale actions',
      { ...base, target: cronJob, acquireAction: scaleUp, releaseAction: scaleZero },
      SpecError.cronJobActions,
    ],
    [
      '9 CronJob acquire suspend=true',
      { ...base, target: cronJob, acquireAction: { suspend: true }, releaseAction: { suspend: true } },
      SpecError.cronJobActions,
    ],
    [
      '9 CronJob release suspend=false',
      { ...base, target: cronJob, acquireAction: { suspend: false }, releaseAction: { suspend: false } },
      SpecError.cronJobActions,
    ],
    [
      '9 CronJob with suspend and scale',
      {
        ...base,
        target: cronJob,
        acquireAction: { suspend: false, scale: { replicas: 1 } },
        releaseAction: { suspend: true },
      },
      SpecError.cronJobActions,
    ],
    [
      '10 unsupported kind',
      {
        ...base,
        target: { apiVersion: 'v1', kind: 'Pod', name: 'p' },
        acquireAction: scaleUp,
        releaseAction: scaleZero,
      },
      SpecError.unsupportedTarget,
    ],
    [
      '10 wrong group for Deployment',
      {
        ...base,
        target: { ...deployment, apiVersion: 'extensions/v1beta1' },
        acquireAction: scaleUp,
        releaseAction: scaleZero,
      },
      SpecError.unsupportedTarget,
    ],
    [
      '10 CronJob in apps/v1',
      {
        ...base,
        target: { ...cronJob, apiVersion: 'apps/v1' },
        acquireAction: { suspend: false },
        releaseAction: { suspend: true },
      },
      SpecError.unsupportedTarget,
    ],
    [
      '11 Deployment with suspend',
      { ...base, target: deployment, acquireAction: { suspend: false }, releaseAction: scaleZero },
      SpecError.scalableActions,
    ],
    [
      '11 Deployment release to 1',
      { ...base, target: deployment, acquireAction: scaleUp, releaseAction: { scale: { replicas: 1 } } },
      SpecError.scalableActions,
    ],
    [
      '11 Deployment negative acquire',
      { ...base, target: deployment, acquireAction: { scale: { replicas: -1 } }, releaseAction: scaleZero },
      SpecError.scalableActions,
    ],
    [
      '11 Deployment release with suspend and scale',
      {
        ...base,
        target: deployment,
        acquireAction: scaleUp,
        releaseAction: { suspend: true, scale: { replicas: 0 } },
      },
      SpecError.scalableActions,
    ],
  ];
  it.each(cases)('rule %s', (_name, spec, message) => {
    expect(validateSpec(spec)).toBe(message);
  });
});

describe('schemas', () => {
  it('parse a BerthLease and reject an action with both suspend and scale', () => {
    const lease = berthLeaseSchema.parse({
      apiVersion: 'berth.skaphos.io/v1alpha1',
      kind: 'BerthLease',
      metadata: { name: 'ingest', namespace: 'pipeline', uid: 'u1', generation: 2 },
      spec: base,
      status: { leaseState: 'held', fencingToken: 3, conditions: [] },
    });
    expect(lease.spec.leaseName).toBe('ingest');
    expect(lease.status?.fencingToken).toBe(3);
    const bad = berthLeaseSpecSchema.safeParse({
      ...base,
      acquireAction: { suspend: true, scale: { replicas: 1 } },
    });
    expect(bad.success).toBe(false);
    expect(berthLeaseSpecSchema.safeParse({ ...base, ttlSeconds: 2 ** 31 }).success).toBe(false);
  });

  it('picks the holder: cluster id first, then spec.holderIdentity', () => {
    expect(holderFor('cluster-east', base)).toBe('cluster-east');
    expect(holderFor('', base)).toBe('worker-east-1');
  });
});
