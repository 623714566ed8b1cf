// The Mutating and Validating webhook configurations of WorkloadAdmission (docs/behaviour.md §4.2), built here and
// nowhere else: deploy/ renders them from these builders. Plus the start-up check that reads the live
// objects and refuses readiness when they would lock the cluster (or the operator itself) out, or would
// not enforce what the operator relies on.
import type {
  V1LabelSelector,
  V1MutatingWebhook,
  V1MutatingWebhookConfiguration,
  V1RuleWithOperations,
  V1ValidatingWebhook,
  V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import {
  AdmissionScope,
  GROUP,
  LEASE_SCOPE_WEBHOOK,
  MUTATE_WORKLOADS_PATH,
  MUTATE_WORKLOADS_WEBHOOK,
  NAMESPACE_SCOPE_WEBHOOK,
  PLURAL,
  SCOPE_ENABLED,
  SCOPE_LABEL,
  SCOPE_LEAVING,
  VALIDATE_SCOPE_PATH,
  VALIDATE_WORKLOADS_PATH,
  VALIDATE_WORKLOADS_WEBHOOK,
  VERSION,
} from '../src/berth/api.ts';
import { isNotFound, readJson } from '../src/kube/client.ts';
import { type Clock, realClock, type Timer } from '../src/kube/clock.ts';
import { matchesLabelSelector } from '../src/kube/labels.ts';
import type { KubeRequester } from '../src/kube/transport.ts';
import type { HealthCheck } from '../src/observability/health.ts';
import type { Logger } from '../src/observability/logger.ts';
import { apiErrorMessage } from './resolve.ts';

/** `<fullname>-injection-workloads` of the original chart, with fullname `berth-operator`. */
export const DEFAULT_CONFIGURATION_NAME = 'berth-operator-injection-workloads';
/**
 * The webhook Service (port 443 -> container port `webhook`, 9443); certs/'s `--webhook-service-name`
 * default, for which the serving certificate is issued. (The original chart's `<fullname>-injection`.)
 */
export const DEFAULT_SERVICE_NAME = 'berth-operator-webhook';
export const DEFAULT_SERVICE_PORT = 443;
export const WEBHOOK_TIMEOUT_SECONDS = 10;
export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';
/** Never admitted through these webhooks: the control plane's own namespace. */
export const ALWAYS_EXCLUDED_NAMESPACES = ['kube-system'] as const;

export const MUTATING_SIDE_EFFECTS = 'None';
/** The validating webhook writes BerthLease status (recordTarget), except on dry-run. */
export const VALIDATING_SIDE_EFFECTS = 'NoneOnDryRun';
/** The scope guards only read. */
export const SCOPE_SIDE_EFFECTS = 'None';

export interface WebhookConfigurationParams {
  /** The operator namespace: the Service lives there and it is never admitted. */
  namespace: string;
  /**
   * `--workload-admission-scope`: `opt-in` selects only namespaces labelled `SCOPE_LABEL=enabled` and adds
   * the scope's two guards to the validating configuration; `all` is every namespace, as the Go operator.
   */
  scope: AdmissionScope;
  serviceName?: string;
  servicePort?: number;
  /** Name of both configuration objects. */
  name?: string;
  /** base64 PEM CA bundle; omit when a CA injector (cert-manager) fills it. */
  caBundle?: string;
  /** Extra metadata annotations, e.g. `cert-manager.io/inject-ca-from`. */
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
}

const WORKLOAD_RESOURCES = [
  { group: 'apps', resources: ['deployments', 'statefulsets', 'replicasets'] },
  { group: 'batch', resources: ['cronjobs', 'jobs'] },
  { group: '', resources: ['pods'] },
] as const;

function rules(operations: string[], withBinding: boolean): V1RuleWithOperations[] {
  const out: V1RuleWithOperations[] = WORKLOAD_RESOURCES.map((r) => ({
    apiGroups: [r.group],
    apiVersions: ['v1'],
    operations: [...operations],
    resources: [...r.resources],
    scope: 'Namespaced',
  }));
  if (withBinding) {
    out.push({
      apiGroups: [''],
      apiVersions: ['v1'],
      operations: ['CREATE'],
      resources: ['pods/binding'],
      scope: 'Namespaced',
    });
  }
  return out;
}

export function excludedNamespaces(namespace: string): string[] {
  return [...new Set([namespace, ...ALWAYS_EXCLUDED_NAMESPACES])];
}

/** The scope label's values under which a namespace is reviewed: entered, and leaving. */
export const REVIEWED_VALUES = [SCOPE_ENABLED, SCOPE_LEAVING] as const;

/** The excluded namespaces' term, in every selector of these configurations. */
const exclusion = (namespace: string) => ({
  key: NAMESPACE_NAME_LABEL,
  operator: 'NotIn',
  values: excludedNamespaces(namespace),
});

/** Where the workload webhooks apply: every namespace but the excluded ones, or only those in scope. */
export function namespaceSelector(namespace: string, scope: AdmissionScope): V1LabelSelector {
  return {
    matchExpressions: [
      exclusion(namespace),
      ...(scope === AdmissionScope.OptIn
        ? [{ key: SCOPE_LABEL, operator: 'In', values: [...REVIEWED_VALUES] }]
        : []),
    ],
  };
}

/** How the API server reaches a webhook of this operator: its Service, at `path`, with v1 reviews. */
export function serviceClient(
  p: { namespace: string; serviceName?: string; servicePort?: number; caBundle?: string },
  path: string,
) {
  return {
    admissionReviewVersions: ['v1'],
    clientConfig: {
      service: {
        namespace: p.namespace,
        name: p.serviceName ?? DEFAULT_SERVICE_NAME,
        port: p.servicePort ?? DEFAULT_SERVICE_PORT,
        path,
      },
      ...(p.caBundle ? { caBundle: p.caBundle } : {}),
    },
  };
}

function common(p: WebhookConfigurationParams, path: string) {
  return {
    ...serviceClient(p, path),
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    // No objectSelector: workloads cannot opt out with labels.
    namespaceSelector: namespaceSelector(p.namespace, p.scope),
    timeoutSeconds: WEBHOOK_TIMEOUT_SECONDS,
  };
}

/** CEL: the scope label's value of `object` ('' when absent). */
const scopeValueCel = (object: string): string =>
  `((has(${object}.metadata.labels) && '${SCOPE_LABEL}' in ${object}.metadata.labels) ? ${object}.metadata.labels['${SCOPE_LABEL}'] : '')`;

/**
 * The opt-in scope's two guards (docs/admission.md, "The admission scope"), both on the scope path, both
 * selecting every namespace but the excluded ones:
 * - every CREATE of a BerthLease with a target: admitted only once the namespace has been in the scope
 *   (`enabled`) for the settle period, as the serving replica's own informer has seen it;
 * - every namespace UPDATE that changes the scope label of a namespace in the scope (the matchConditions
 *   pass only those): between `enabled` and `leaving` anyone may switch; any other change only the
 *   operator, from `leaving`, once nothing managed is left. kube-apiserver matches a namespace's own
 *   writes against its new labels, so a label selector would miss the very write that removes the label.
 */
export function scopeWebhooks(p: WebhookConfigurationParams): V1ValidatingWebhook[] {
  const shared = {
    ...serviceClient(p, VALIDATE_SCOPE_PATH),
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    sideEffects: SCOPE_SIDE_EFFECTS,
    timeoutSeconds: WEBHOOK_TIMEOUT_SECONDS,
  };
  return [
    {
      name: LEASE_SCOPE_WEBHOOK,
      ...shared,
      namespaceSelector: { matchExpressions: [exclusion(p.namespace)] },
      matchConditions: [{ name: 'has-target', expression: 'has(object.spec) && has(object.spec.target)' }],
      rules: [
        {
          apiGroups: [GROUP],
          apiVersions: [VERSION],
          operations: ['CREATE'],
          resources: [PLURAL],
          scope: 'Namespaced',
        },
      ],
    },
    {
      name: NAMESPACE_SCOPE_WEBHOOK,
      ...shared,
      namespaceSelector: { matchExpressions: [exclusion(p.namespace)] },
      matchConditions: [
        {
          name: 'changes-the-scope',
          expression: `${scopeValueCel('oldObject')} in ['${SCOPE_ENABLED}', '${SCOPE_LEAVING}'] && ${scopeValueCel('object')} != ${scopeValueCel('oldObject')}`,
        },
      ],
      rules: [
        {
          apiGroups: [''],
          apiVersions: ['v1'],
          operations: ['UPDATE'],
          // The status and finalize subresources write the namespace's labels too.
          resources: ['namespaces', 'namespaces/status', 'namespaces/finalize'],
          scope: 'Cluster',
        },
      ],
    },
  ];
}

/** The metadata of a webhook configuration of this operator: its name, its component, the caller's extras. */
export function configurationMetadata(
  name: string,
  component: string,
  extra: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
) {
  return {
    name,
    labels: {
      'app.kubernetes.io/name': 'berth-operator',
      'app.kubernetes.io/component': component,
      ...extra.labels,
    },
    ...(extra.annotations && Object.keys(extra.annotations).length > 0
      ? { annotations: { ...extra.annotations } }
      : {}),
  };
}

const metadata = (p: WebhookConfigurationParams) =>
  configurationMetadata(p.name ?? DEFAULT_CONFIGURATION_NAME, 'workload-admission', p);

export function mutatingWebhookConfiguration(p: WebhookConfigurationParams): V1MutatingWebhookConfiguration {
  const webhook: V1MutatingWebhook = {
    name: MUTATE_WORKLOADS_WEBHOOK,
    ...common(p, MUTATE_WORKLOADS_PATH),
    reinvocationPolicy: 'Never',
    rules: rules(['CREATE'], false),
    sideEffects: MUTATING_SIDE_EFFECTS,
  };
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: metadata(p),
    webhooks: [webhook],
  };
}

export function validatingWebhookConfiguration(
  p: WebhookConfigurationParams,
): V1ValidatingWebhookConfiguration {
  const webhook: V1ValidatingWebhook = {
    name: VALIDATE_WORKLOADS_WEBHOOK,
    ...common(p, VALIDATE_WORKLOADS_PATH),
    rules: rules(['CREATE', 'UPDATE'], true),
    sideEffects: VALIDATING_SIDE_EFFECTS,
  };
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: metadata(p),
    webhooks: [webhook, ...(p.scope === AdmissionScope.OptIn ? scopeWebhooks(p) : [])],
  };
}

// ---- verification of the live objects ----

type AnyWebhook = V1MutatingWebhook | V1ValidatingWebhook;

// Rule matching as the API server does it: `*` is every resource but no subresource, `*/*` everything.
function resourceMatches(patterns: string[], resource: string): boolean {
  const [res, sub] = resource.split('/', 2) as [string, string | undefined];
  return patterns.some((p) => {
    if (p === '*/*' || p === resource) return true;
    if (sub === undefined) return p === '*';
    return p === `${res}/*` || p === `*/${sub}`;
  });
}

const covers = (
  rule: V1RuleWithOperations,
  group: string,
  version: string,
  resource: string,
  operation: string,
): boolean => {
  const has = (list: string[] | undefined, v: string): boolean =>
    (list ?? []).includes(v) || (list ?? []).includes('*');
  return (
    has(rule.apiGroups, group) &&
    has(rule.apiVersions, version) &&
    resourceMatches(rule.resources ?? [], resource) &&
    has(rule.operations, operation)
  );
};

/**
 * The path a webhook calls: its Service's, or that of its `url` (an operator outside the cluster, reached
 * by address, as the end-to-end tests run it).
 */
function calledPath(config: AnyWebhook['clientConfig'] | undefined): string | undefined {
  if (config?.service !== undefined) return config.service.path;
  if (config?.url === undefined) return undefined;
  try {
    return new URL(config.url).pathname;
  } catch {
    return undefined;
  }
}

function verifyWebhook(
  what: string,
  live: AnyWebhook | undefined,
  expected: AnyWebhook,
  namespace: string,
): string[] {
  if (live === undefined) return [`${what} has no webhook ${JSON.stringify(expected.name)}`];
  const problems: string[] = [];
  const at = `${what} webhook ${JSON.stringify(expected.name)}`;
  const path = calledPath(live.clientConfig);
  if (path !== expected.clientConfig.service?.path) {
    problems.push(
      `${at} calls path ${JSON.stringify(path ?? '')}, want ${JSON.stringify(expected.clientConfig.service?.path)}`,
    );
  }
  // The v1 API defaults failurePolicy to Fail and timeoutSeconds to 10; a live object always has both.
  const failurePolicy = live.failurePolicy ?? 'Fail';
  if (failurePolicy !== expected.failurePolicy) {
    problems.push(`${at} has failurePolicy ${failurePolicy}, want ${expected.failurePolicy}`);
  }
  const timeout = live.timeoutSeconds ?? WEBHOOK_TIMEOUT_SECONDS;
  if (timeout !== expected.timeoutSeconds) {
    problems.push(`${at} has timeoutSeconds ${timeout}, want ${expected.timeoutSeconds}`);
  }
  if (live.sideEffects !== expected.sideEffects) {
    problems.push(`${at} has sideEffects ${live.sideEffects ?? '(none)'}, want ${expected.sideEffects}`);
  }
  for (const ns of excludedNamespaces(namespace)) {
    // Excluded by name, whatever else the namespace carries: a scope label must not let it in.
    const labelled: Array<Record<string, string>> = [
      { [NAMESPACE_NAME_LABEL]: ns },
      ...REVIEWED_VALUES.map((value) => ({ [NAMESPACE_NAME_LABEL]: ns, [SCOPE_LABEL]: value })),
    ];
    if (labelled.some((labels) => matchesLabelSelector(live.namespaceSelector, labels))) {
      const own = ns === namespace ? 'the operator namespace ' : '';
      problems.push(
        `${at} does not exclude ${own}${JSON.stringify(ns)} (namespaceSelector must exclude ${NAMESPACE_NAME_LABEL} NotIn [${excludedNamespaces(namespace).join(', ')}])`,
      );
    }
  }
  const objectSelector = live.objectSelector;
  if (
    objectSelector !== undefined &&
    ((objectSelector.matchExpressions ?? []).length > 0 ||
      Object.keys(objectSelector.matchLabels ?? {}).length > 0)
  ) {
    problems.push(`${at} has an objectSelector: workloads could opt out of admission`);
  }
  for (const rule of expected.rules ?? []) {
    const version = rule.apiVersions?.[0] ?? 'v1';
    for (const group of rule.apiGroups ?? []) {
      for (const resource of rule.resources ?? []) {
        for (const op of rule.operations ?? []) {
          if (!(live.rules ?? []).some((r) => covers(r, group, version, resource, op))) {
            problems.push(`${at} does not cover ${op} of ${group === '' ? '' : `${group}/`}${resource}`);
          }
        }
      }
    }
  }
  return problems;
}

export interface LiveConfigurations {
  /** Undefined when the object does not exist. */
  mutating: V1MutatingWebhookConfiguration | undefined;
  validating: V1ValidatingWebhookConfiguration | undefined;
}

/**
 * What is wrong with the live configurations, one line each; empty when each that exists is as the
 * builders make it in every respect that matters: the operator namespace (and kube-system) excluded, failurePolicy
 * Fail, timeout 10 s, side-effect classes, paths, no objectSelector, and every rule covered.
 */
export function verifyWebhookConfigurations(
  live: LiveConfigurations,
  p: WebhookConfigurationParams,
): string[] {
  const problems: string[] = [];
  const name = p.name ?? DEFAULT_CONFIGURATION_NAME;
  const want = { m: mutatingWebhookConfiguration(p), v: validatingWebhookConfiguration(p) };
  const mWant = want.m.webhooks![0]!;
  const vWant = want.v.webhooks![0]!;
  // An absent configuration is not registered yet (webhooks/registration.ts): it blocks nothing.
  if (live.mutating !== undefined) {
    const hook = (live.mutating.webhooks ?? []).find((w) => w.name === mWant.name);
    problems.push(
      ...verifyWebhook(`MutatingWebhookConfiguration ${JSON.stringify(name)}`, hook, mWant, p.namespace),
    );
  }
  if (live.validating !== undefined) {
    const what = `ValidatingWebhookConfiguration ${JSON.stringify(name)}`;
    const hooks = live.validating.webhooks ?? [];
    problems.push(
      ...verifyWebhook(
        what,
        hooks.find((w) => w.name === vWant.name),
        vWant,
        p.namespace,
      ),
    );
    // The scope's guards are checked where they exist; a configuration registered before them (an
    // upgrade from the cluster-wide mode) lacks them until the leader writes them, and blocks nothing more.
    for (const guard of want.v.webhooks!.slice(1)) {
      const hook = hooks.find((w) => w.name === guard.name);
      if (hook !== undefined) problems.push(...verifyWebhook(what, hook, guard, p.namespace));
    }
  }
  return problems;
}

const CONFIG_PATH = '/apis/admissionregistration.k8s.io/v1';

/** Reads both live configurations (undefined for one that does not exist). */
export async function readWebhookConfigurations(
  transport: KubeRequester,
  name: string,
): Promise<LiveConfigurations> {
  const get = async <T>(plural: string): Promise<T | undefined> => {
    try {
      return await readJson<T>(
        await transport.request({ path: `${CONFIG_PATH}/${plural}/${encodeURIComponent(name)}` }),
      );
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`cannot read ${plural}/${name}: ${apiErrorMessage(err)}`);
    }
  };
  const [mutating, validating] = await Promise.all([
    get<V1MutatingWebhookConfiguration>('mutatingwebhookconfigurations'),
    get<V1ValidatingWebhookConfiguration>('validatingwebhookconfigurations'),
  ]);
  return { mutating, validating };
}

export interface ConfigurationCheckOptions {
  read: () => Promise<LiveConfigurations>;
  params: WebhookConfigurationParams;
  logger?: Logger;
  clock?: Clock;
  /** Delay between attempts while the check fails. Default 10 s. */
  retryMs?: number;
}

export interface ConfigurationCheck {
  /** Readiness: fails until the live configurations have been verified once. */
  readonly check: HealthCheck;
  /** Runs the first verification now and retries until it passes. */
  start(): Promise<void>;
  stop(): void;
  readonly problems: readonly string[];
}

/**
 * The start-up guard. Until the live configurations pass, readiness fails with the problems (and each new
 * set of problems is logged once as an error). Once they pass, it stops: un-readying every replica later
 * because someone edited a configuration would turn that edit into a cluster-wide admission outage.
 */
export function configurationCheck(options: ConfigurationCheckOptions): ConfigurationCheck {
  const clock = options.clock ?? realClock;
  let problems: string[] = ['webhook configurations not verified yet'];
  let passed = false;
  let stopped = false;
  let timer: Timer | undefined;
  let lastLogged = '';

  const attempt = async (): Promise<void> => {
    let found: string[];
    try {
      found = verifyWebhookConfigurations(await options.read(), options.params);
    } catch (err) {
      found = [err instanceof Error ? err.message : String(err)];
    }
    if (stopped) return;
    if (found.length === 0) {
      passed = true;
      problems = [];
      options.logger?.info('webhook configurations verified');
      return;
    }
    problems = found;
    const summary = found.join('; ');
    if (summary !== lastLogged) {
      lastLogged = summary;
      options.logger?.error(
        { problems: found },
        `refusing readiness: webhook configurations are unsafe: ${summary}`,
      );
    }
    timer = clock.setTimeout(() => void attempt(), options.retryMs ?? 10_000);
  };

  return {
    check: () => {
      if (!passed) throw new Error(problems.join('; '));
    },
    start: () => attempt(),
    stop: () => {
      stopped = true;
      timer?.cancel();
    },
    get problems() {
      return problems;
    },
  };
}
