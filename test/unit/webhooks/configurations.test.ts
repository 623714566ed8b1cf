// The webhook configuration builders (docs/behaviour.md §4.2) and the start-up verification of the live objects.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/kube/clock.ts';
import {
  configurationCheck,
  type LiveConfigurations,
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
  verifyWebhookConfigurations,
} from '../../../webhooks/configurations.ts';

// The Go operator's shape (every namespace); the opt-in scope's additions are tested below.
const params = { namespace: 'berth-system', caBundle: 'Q0E=', scope: 'all' } as const;

describe('builders', () => {
  it('builds the mutating configuration exactly', () => {
    expect(mutatingWebhookConfiguration(params)).toEqual({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: {
        name: 'berth-operator-injection-workloads',
        labels: {
          'app.kubernetes.io/name': 'berth-operator',
          'app.kubernetes.io/component': 'workload-admission',
        },
      },
      webhooks: [
        {
          name: 'mutate-workloads.berth.skaphos.io',
          admissionReviewVersions: ['v1'],
          clientConfig: {
            service: {
              namespace: 'berth-system',
              name: 'berth-operator-webhook',
              port: 443,
              path: '/mutate-managed-workloads',
            },
            caBundle: 'Q0E=',
          },
          failurePolicy: 'Fail',
          matchPolicy: 'Equivalent',
          namespaceSelector: {
            matchExpressions: [
              {
                key: 'kubernetes.io/metadata.name',
                operator: 'NotIn',
                values: ['berth-system', 'kube-system'],
              },
            ],
          },
          timeoutSeconds: 10,
          reinvocationPolicy: 'Never',
          rules: [
            {
              apiGroups: ['apps'],
              apiVersions: ['v1'],
              operations: ['CREATE'],
              resources: ['deployments', 'statefulsets', 'replicasets'],
              scope: 'Namespaced',
            },
            {
              apiGroups: ['batch'],
              apiVersions: ['v1'],
              operations: ['CREATE'],
              resources: ['cronjobs', 'jobs'],
              scope: 'Namespaced',
            },
            {
              apiGroups: [''],
              apiVersions: ['v1'],
              operations: ['CREATE'],
              resources: ['pods'],
              scope: 'Namespaced',
            },
          ],
          sideEffects: 'None',
        },
      ],
    });
  });

  it('builds the validating configuration with UPDATE, pods/binding and NoneOnDryRun', () => {
    const v = validatingWebhookConfiguration({
      ...params,
      serviceName: 'hooks',
      servicePort: 8443,
      name: 'custom',
    });
    const hook = v.webhooks![0]!;
    expect(v.metadata?.name).toBe('custom');
    expect(hook.name).toBe('validate-workloads.berth.skaphos.io');
    expect(hook.clientConfig.service).toEqual({
      namespace: 'berth-system',
      name: 'hooks',
      port: 8443,
      path: '/validate-managed-workloads',
    });
    expect(hook.sideEffects).toBe('NoneOnDryRun');
    expect(hook.failurePolicy).toBe('Fail');
    expect(hook.matchPolicy).toBe('Equivalent');
    expect(hook.timeoutSeconds).toBe(10);
    expect(hook.objectSelector).toBeUndefined();
    expect('reinvocationPolicy' in hook).toBe(false);
    expect(hook.rules).toEqual([
      {
        apiGroups: ['apps'],
        apiVersions: ['v1'],
        operations: ['CREATE', 'UPDATE'],
        resources: ['deployments', 'statefulsets', 'replicasets'],
        scope: 'Namespaced',
      },
      {
        apiGroups: ['batch'],
        apiVersions: ['v1'],
        operations: ['CREATE', 'UPDATE'],
        resources: ['cronjobs', 'jobs'],
        scope: 'Namespaced',
      },
      {
        apiGroups: [''],
        apiVersions: ['v1'],
        operations: ['CREATE', 'UPDATE'],
        resources: ['pods'],
        scope: 'Namespaced',
      },
      {
        apiGroups: [''],
        apiVersions: ['v1'],
        operations: ['CREATE'],
        resources: ['pods/binding'],
        scope: 'Namespaced',
      },
    ]);
  });

  it('omits caBundle for CA injection and carries the injector annotation', () => {
    const m = mutatingWebhookConfiguration({
      namespace: 'ops',
      scope: 'all',
      annotations: { 'cert-manager.io/inject-ca-from': 'ops/berth-operator-injection' },
    });
    expect(m.webhooks![0]!.clientConfig.caBundle).toBeUndefined();
    expect(m.metadata?.annotations).toEqual({
      'cert-manager.io/inject-ca-from': 'ops/berth-operator-injection',
    });
  });

  it('does not list kube-system twice when the operator runs there', () => {
    const sel = mutatingWebhookConfiguration({ namespace: 'kube-system', scope: 'all' }).webhooks![0]!
      .namespaceSelector;
    expect(sel?.matchExpressions?.[0]?.values).toEqual(['kube-system']);
  });
});

const live = (): LiveConfigurations => ({
  mutating: structuredClone(mutatingWebhookConfiguration(params)),
  validating: structuredClone(validatingWebhookConfiguration(params)),
});

describe('verifyWebhookConfigurations', () => {
  it('accepts what the builders make (with or without the caBundle)', () => {
    expect(verifyWebhookConfigurations(live(), params)).toEqual([]);
    expect(verifyWebhookConfigurations(live(), { namespace: 'berth-system', scope: 'all' })).toEqual([]);
  });

  it('accepts extra excluded namespaces and API-server defaults', () => {
    const l = live();
    const hook = l.validating!.webhooks![0]!;
    hook.namespaceSelector!.matchExpressions![0]!.values!.push('monitoring');
    hook.objectSelector = {};
    delete hook.failurePolicy;
    expect(verifyWebhookConfigurations(l, params)).toEqual([]);
  });

  it('names every unsafe difference', () => {
    const l = live();
    const m = l.mutating!.webhooks![0]!;
    m.failurePolicy = 'Ignore';
    m.timeoutSeconds = 30;
    m.sideEffects = 'NoneOnDryRun';
    m.namespaceSelector = {
      matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system'] }],
    };
    m.objectSelector = { matchLabels: { managed: 'yes' } };
    m.rules = m.rules!.filter((r) => !r.resources!.includes('pods'));
    const v = l.validating!.webhooks![0]!;
    v.clientConfig.service!.path = '/validate';
    v.rules = v.rules!.filter((r) => !r.resources!.includes('pods/binding'));
    const M =
      'MutatingWebhookConfiguration "berth-operator-injection-workloads" webhook "mutate-workloads.berth.skaphos.io"';
    const V =
      'ValidatingWebhookConfiguration "berth-operator-injection-workloads" webhook "validate-workloads.berth.skaphos.io"';
    expect(verifyWebhookConfigurations(l, params)).toEqual([
      `${M} has failurePolicy Ignore, want Fail`,
      `${M} has timeoutSeconds 30, want 10`,
      `${M} has sideEffects NoneOnDryRun, want None`,
      `${M} does not exclude the operator namespace "berth-system" (namespaceSelector must exclude kubernetes.io/metadata.name NotIn [berth-system, kube-system])`,
      `${M} has an objectSelector: workloads could opt out of admission`,
      `${M} does not cover CREATE of pods`,
      `${V} calls path "/validate", want "/validate-managed-workloads"`,
      `${V} does not cover CREATE of pods/binding`,
    ]);
  });

  it('reports missing webhooks; a configuration not registered yet blocks nothing and is no problem', () => {
    expect(verifyWebhookConfigurations({ mutating: undefined, validating: undefined }, params)).toEqual([]);
    expect(verifyWebhookConfigurations({ ...live(), validating: undefined }, params)).toEqual([]);
    const l = live();
    l.validating!.webhooks = [];
    expect(verifyWebhookConfigurations(l, params)).toEqual([
      'ValidatingWebhookConfiguration "berth-operator-injection-workloads" has no webhook "validate-workloads.berth.skaphos.io"',
    ]);
  });

  it('wildcard rules cover every resource except subresources', () => {
    const l = live();
    l.validating!.webhooks![0]!.rules = [
      { apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*'], scope: '*' },
    ];
    expect(verifyWebhookConfigurations(l, params)).toEqual([
      'ValidatingWebhookConfiguration "berth-operator-injection-workloads" webhook "validate-workloads.berth.skaphos.io" does not cover CREATE of pods/binding',
    ]);
  });
});

describe('configurationCheck', () => {
  it('fails readiness until the configurations pass, retrying, then stays passed', async () => {
    const clock = new ManualClock();
    // Someone emptied the validating configuration: the operator would not be called for what it guards.
    let current: LiveConfigurations = { ...live(), validating: { ...live().validating!, webhooks: [] } };
    let reads = 0;
    const logged: string[] = [];
    const logger = {
      info: (msg: string) => logged.push(`info ${msg}`),
      error: (_obj: unknown, msg: string) => logged.push(`error ${msg}`),
    } as unknown as import('../../../src/observability/logger.ts').Logger;
    const check = configurationCheck({
      read: async () => {
        reads++;
        return current;
      },
      params,
      clock,
      logger,
      retryMs: 10_000,
    });
    expect(() => check.check()).toThrow('webhook configurations not verified yet');
    await check.start();
    expect(() => check.check()).toThrow(/has no webhook/);
    expect(logged).toEqual([
      'error refusing readiness: webhook configurations are unsafe: ValidatingWebhookConfiguration "berth-operator-injection-workloads" has no webhook "validate-workloads.berth.skaphos.io"',
    ]);
    clock.advance(10_000);
    await Promise.resolve();
    expect(reads).toBe(2);
    expect(logged).toHaveLength(1); // the same problems are not logged again
    current = live();
    clock.advance(10_000);
    await new Promise((r) => setImmediate(r));
    expect(reads).toBe(3);
    expect(() => check.check()).not.toThrow();
    expect(logged.at(-1)).toBe('info webhook configurations verified');
    clock.advance(60_000);
    expect(reads).toBe(3);
    check.stop();
  });

  it('a read error is a readiness failure with the error', async () => {
    const check = configurationCheck({
      read: async () => {
        throw new Error('cannot read mutatingwebhookconfigurations/x: forbidden');
      },
      params,
      clock: new ManualClock(),
    });
    await check.start();
    expect(() => check.check()).toThrow('cannot read mutatingwebhookconfigurations/x: forbidden');
    check.stop();
  });
});

describe('the opt-in scope', () => {
  const optIn = { namespace: 'berth-system', caBundle: 'Q0E=', scope: 'opt-in' } as const;
  const SCOPED = {
    key: 'berth.skaphos.io/workload-admission',
    operator: 'In',
    values: ['enabled', 'leaving'],
  };
  const EXCLUDED = {
    key: 'kubernetes.io/metadata.name',
    operator: 'NotIn',
    values: ['berth-system', 'kube-system'],
  };

  it('selects only labelled namespaces for the workload webhooks, still excluding the operator and kube-system', () => {
    const m = mutatingWebhookConfiguration(optIn).webhooks!;
    const v = validatingWebhookConfiguration(optIn).webhooks!;
    expect(m).toHaveLength(1);
    expect(m[0]!.namespaceSelector).toEqual({ matchExpressions: [EXCLUDED, SCOPED] });
    expect(v[0]!.name).toBe('validate-workloads.berth.skaphos.io');
    expect(v[0]!.namespaceSelector).toEqual({ matchExpressions: [EXCLUDED, SCOPED] });
  });

  it('adds the two scope guards to the validating configuration, read-only and fail-closed', () => {
    const [, lease, ns] = validatingWebhookConfiguration(optIn).webhooks!;
    const client = (path: string) => ({
      service: { namespace: 'berth-system', name: 'berth-operator-webhook', port: 443, path },
      caBundle: 'Q0E=',
    });
    expect(lease).toEqual({
      name: 'berthlease-scope.berth.skaphos.io',
      admissionReviewVersions: ['v1'],
      clientConfig: client('/validate-admission-scope'),
      failurePolicy: 'Fail',
      matchPolicy: 'Equivalent',
      sideEffects: 'None',
      timeoutSeconds: 10,
      // Every namespace: the serving replica decides by how long it has seen the namespace in scope.
      namespaceSelector: { matchExpressions: [EXCLUDED] },
      matchConditions: [{ name: 'has-target', expression: 'has(object.spec) && has(object.spec.target)' }],
      rules: [
        {
          apiGroups: ['berth.skaphos.io'],
          apiVersions: ['v1alpha1'],
          operations: ['CREATE'],
          resources: ['berthleases'],
          scope: 'Namespaced',
        },
      ],
    });
    const value = (o: string) =>
      `((has(${o}.metadata.labels) && 'berth.skaphos.io/workload-admission' in ${o}.metadata.labels) ? ${o}.metadata.labels['berth.skaphos.io/workload-admission'] : '')`;
    expect(ns).toEqual({
      name: 'namespace-scope.berth.skaphos.io',
      admissionReviewVersions: ['v1'],
      clientConfig: client('/validate-admission-scope'),
      failurePolicy: 'Fail',
      matchPolicy: 'Equivalent',
      sideEffects: 'None',
      timeoutSeconds: 10,
      // A namespace's own UPDATE is matched against its new labels: no scope term here.
      namespaceSelector: { matchExpressions: [EXCLUDED] },
      matchConditions: [
        {
          name: 'changes-the-scope',
          expression: `${value('oldObject')} in ['enabled', 'leaving'] && ${value('object')} != ${value('oldObject')}`,
        },
      ],
      rules: [
        {
          apiGroups: [''],
          apiVersions: ['v1'],
          operations: ['UPDATE'],
          resources: ['namespaces', 'namespaces/status', 'namespaces/finalize'],
          scope: 'Cluster',
        },
      ],
    });
  });

  const liveOptIn = (): LiveConfigurations => ({
    mutating: structuredClone(mutatingWebhookConfiguration(optIn)),
    validating: structuredClone(validatingWebhookConfiguration(optIn)),
  });

  it('accepts what the builders make, and a cluster-wide configuration the leader has not narrowed yet', () => {
    expect(verifyWebhookConfigurations(liveOptIn(), optIn)).toEqual([]);
    // An upgrade: the live objects are the cluster-wide ones, without the guards; readiness must not wait
    // for the leader to rewrite them (the rolling update would never get a ready replica).
    expect(verifyWebhookConfigurations(live(), optIn)).toEqual([]);
  });

  it('checks a scope guard that exists like the others', () => {
    const l = liveOptIn();
    const guard = l.validating!.webhooks![2]!;
    guard.failurePolicy = 'Ignore';
    guard.sideEffects = 'Some';
    expect(verifyWebhookConfigurations(l, optIn)).toEqual([
      'ValidatingWebhookConfiguration "berth-operator-injection-workloads" webhook "namespace-scope.berth.skaphos.io" has failurePolicy Ignore, want Fail',
      'ValidatingWebhookConfiguration "berth-operator-injection-workloads" webhook "namespace-scope.berth.skaphos.io" has sideEffects Some, want None',
    ]);
  });

  it('refuses a selector that keeps the operator namespace out only while it is unlabelled', () => {
    const l = liveOptIn();
    l.mutating!.webhooks![0]!.namespaceSelector = { matchExpressions: [SCOPED] };
    expect(verifyWebhookConfigurations(l, optIn)).toEqual([
      'MutatingWebhookConfiguration "berth-operator-injection-workloads" webhook "mutate-workloads.berth.skaphos.io" does not exclude the operator namespace "berth-system" (namespaceSelector must exclude kubernetes.io/metadata.name NotIn [berth-system, kube-system])',
      'MutatingWebhookConfiguration "berth-operator-injection-workloads" webhook "mutate-workloads.berth.skaphos.io" does not exclude "kube-system" (namespaceSelector must exclude kubernetes.io/metadata.name NotIn [berth-system, kube-system])',
    ]);
  });
});
