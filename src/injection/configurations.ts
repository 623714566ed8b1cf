// The injection webhook configurations (docs/injection.md, "Install"), built here and registered by the
// leader as WorkloadAdmission's are (webhooks/registration.ts): the Go chart's `<fullname>-injection`
// Mutating (inject.berth.skaphos.io) and Validating (validate-injection.berth.skaphos.io) configurations.
// Only Pods labelled berth.skaphos.io/inject=acquire are sent (objectSelector), never from the control-plane
// namespaces; Pod CREATE, and the pods/ephemeralcontainers UPDATE that `kubectl debug` makes.
import type {
  V1MutatingWebhookConfiguration,
  V1RuleWithOperations,
  V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import {
  configurationMetadata,
  NAMESPACE_NAME_LABEL,
  serviceClient,
  WEBHOOK_TIMEOUT_SECONDS,
} from '../../webhooks/configurations.ts';
import { INJECT_LABEL, INJECT_VALUE } from './contract.ts';
import {
  INJECT_WEBHOOK,
  MUTATE_POD_PATH,
  VALIDATE_INJECTION_WEBHOOK,
  VALIDATE_POD_PATH,
} from './handlers.ts';

/** The Go chart's `<fullname>-injection`, with fullname `berth-operator`. */
export const DEFAULT_INJECTION_CONFIGURATION_NAME = 'berth-operator-injection';
export const FAILURE_POLICIES = ['Fail', 'Ignore'] as const;
export type FailurePolicy = (typeof FAILURE_POLICIES)[number];

export interface InjectionConfigurationParams {
  /** The operator namespace: the Service lives there. */
  namespace: string;
  /** Never sent to the webhooks (the operator namespace among them). */
  controlPlaneNamespaces: readonly string[];
  name?: string;
  serviceName?: string;
  failurePolicy?: FailurePolicy;
  labels?: Record<string, string>;
}

/**
 * `kubectl debug` PATCHes the ephemeralcontainers subresource, which the API server admits as UPDATE (the
 * subresource has no create verb), so CREATE would never match it (Go's chart listed CREATE).
 */
const RULES: V1RuleWithOperations[] = [
  { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' },
  {
    apiGroups: [''],
    apiVersions: ['v1'],
    operations: ['UPDATE'],
    resources: ['pods/ephemeralcontainers'],
    scope: 'Namespaced',
  },
];

function common(p: InjectionConfigurationParams, path: string) {
  return {
    ...serviceClient(p, path),
    failurePolicy: p.failurePolicy ?? 'Fail',
    matchPolicy: 'Equivalent',
    namespaceSelector: {
      matchExpressions: [
        {
          key: NAMESPACE_NAME_LABEL,
          operator: 'NotIn',
          values: [...new Set([p.namespace, ...p.controlPlaneNamespaces])],
        },
      ],
    },
    objectSelector: { matchLabels: { [INJECT_LABEL]: INJECT_VALUE } },
    rules: RULES.map((r) => structuredClone(r)),
    sideEffects: 'None',
    timeoutSeconds: WEBHOOK_TIMEOUT_SECONDS,
  };
}

const metadata = (p: InjectionConfigurationParams) =>
  configurationMetadata(p.name ?? DEFAULT_INJECTION_CONFIGURATION_NAME, 'injection', p);

export function injectionMutatingConfiguration(
  p: InjectionConfigurationParams,
): V1MutatingWebhookConfiguration {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: metadata(p),
    webhooks: [{ name: INJECT_WEBHOOK, ...common(p, MUTATE_POD_PATH), reinvocationPolicy: 'Never' }],
  };
}

export function injectionValidatingConfiguration(
  p: InjectionConfigurationParams,
): V1ValidatingWebhookConfiguration {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: metadata(p),
    webhooks: [{ name: VALIDATE_INJECTION_WEBHOOK, ...common(p, VALIDATE_POD_PATH) }],
  };
}
