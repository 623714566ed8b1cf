// The registration's decisions: when a configuration is created (only once the Service can serve), what
// counts as drift (any field the operator sets, an extra or missing webhook, a non-empty objectSelector,
// the owner reference) and what is kept (fields the API server defaults, others' metadata).
import type {
  V1EndpointSlice,
  V1ValidatingWebhook,
  V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { validatingWebhookConfiguration } from '../../../webhooks/configurations.ts';
import {
  covers,
  hasReadyEndpoint,
  ownerReference,
  registrationAction,
  updated,
  withCaBundle,
} from '../../../webhooks/registration.ts';

const CA = 'Q0EtYnVuZGxl';
const owner = ownerReference({ name: 'berth-operator-injection-workloads', uid: 'uid-1' });
const want = (): V1ValidatingWebhook[] =>
  withCaBundle(
    validatingWebhookConfiguration({ namespace: 'berth-system', scope: 'all' }).webhooks ?? [],
    CA,
  );

/** The configuration as kube-apiserver returns it: our fields plus its defaults and others' metadata. */
function live(webhooks: V1ValidatingWebhook[] = want()): V1ValidatingWebhookConfiguration {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: {
      name: 'berth-operator-injection-workloads',
      resourceVersion: '7',
      labels: { team: 'platform' },
      ownerReferences: [{ ...owner }],
    },
    webhooks: webhooks.map((w) => ({ ...w, objectSelector: {}, matchConditions: undefined })),
  };
}

describe('registrationAction', () => {
  it('creates a missing configuration only once the Service has a ready endpoint', () => {
    expect(registrationAction(undefined, want(), owner, false)).toBe('wait');
    expect(registrationAction(undefined, want(), owner, true)).toBe('create');
  });

  it("leaves a configuration alone when only defaulted fields and others' metadata differ", () => {
    expect(registrationAction(live(), want(), owner, true)).toBe('none');
    // Even while nothing serves: an existing configuration is never waited on or removed.
    expect(registrationAction(live(), want(), owner, false)).toBe('none');
  });

  it('undoes a wiped caBundle, a relaxed failurePolicy, a changed selector, an extra webhook', () => {
    const wiped = live(
      want().map((w) => ({ ...w, clientConfig: { ...w.clientConfig, caBundle: undefined } })),
    );
    const ignore = live(want().map((w) => ({ ...w, failurePolicy: 'Ignore' })));
    const optOut = live();
    optOut.webhooks![0]!.objectSelector = { matchLabels: { skip: 'me' } };
    const widened = live(want().map((w) => ({ ...w, namespaceSelector: {} })));
    const extra = live([...want(), { ...want()[0]!, name: 'other.example.com' }]);
    const none = live([]);
    for (const drifted of [wiped, ignore, optOut, widened, extra, none])
      expect(registrationAction(drifted, want(), owner, false)).toBe('update');
  });

  it('adds the owner reference (a reinstall gives the ClusterRole a new UID)', () => {
    const reinstalled = ownerReference({ name: owner.name, uid: 'uid-2' });
    expect(registrationAction(live(), want(), reinstalled, true)).toBe('update');
    const next = updated(live(), { metadata: { name: 'x' }, webhooks: want() }, reinstalled);
    expect(next.metadata?.ownerReferences).toEqual([reinstalled]);
    expect(next.metadata?.labels).toEqual({ team: 'platform' });
    expect(next.metadata?.resourceVersion).toBe('7');
    expect(registrationAction(next, want(), reinstalled, true)).toBe('none');
  });

  it('keeps owner references of others', () => {
    const other = { apiVersion: 'v1', kind: 'ConfigMap', name: 'x', uid: 'u' };
    const base = live();
    base.metadata!.ownerReferences = [other];
    expect(updated(base, { webhooks: want() }, owner).metadata?.ownerReferences).toEqual([other, owner]);
  });
});

describe('covers', () => {
  it('compares what is wanted, element by element', () => {
    expect(covers({ a: 1, b: [1, { c: 2 }] }, { a: 1, b: [1, { c: 2, d: 3 }], e: 4 })).toBe(true);
    expect(covers({ b: [1] }, { b: [1, 2] })).toBe(false);
    expect(covers({ a: { b: 1 } }, { a: [1] })).toBe(false);
    expect(covers({ a: undefined }, {})).toBe(true);
    expect(covers({ a: 1 }, { a: '1' })).toBe(false);
  });
});

describe('hasReadyEndpoint', () => {
  const slice = (...ready: Array<boolean | undefined>): V1EndpointSlice => ({
    addressType: 'IPv4',
    endpoints: ready.map((r) => ({
      addresses: ['10.0.0.1'],
      conditions: r === undefined ? {} : { ready: r },
    })),
  });
  it('needs one endpoint not known to be unready', () => {
    expect(hasReadyEndpoint([])).toBe(false);
    expect(hasReadyEndpoint([slice()])).toBe(false);
    expect(hasReadyEndpoint([slice(false), slice(false)])).toBe(false);
    expect(hasReadyEndpoint([slice(false), slice(true)])).toBe(true);
    expect(hasReadyEndpoint([slice(undefined)])).toBe(true);
  });
});
