// Which webhooks a request reaches: pure decisions over the stored webhook configurations, following
// k8s.io/apiserver/pkg/admission/plugin/webhook (generic/webhook.go ShouldCallHook, predicates/rules,
// predicates/namespace, predicates/object, matchconditions). No I/O here; the namespace lookup is passed in.
import { Environment, type ParseResult } from '@marcbachmann/cel-js';
import { z } from 'zod';
import { aggregateMessage, forbiddenError, internalError, notFoundError } from './admission-errors.ts';
import { matchesLabelSelectorObject } from './selectors.ts';
import type {
  GroupVersionKind,
  GroupVersionResource,
  JsonObject,
  KubeObject,
  StatusError,
  UserInfo,
} from './types.ts';

export type AdmissionOperation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';

export interface AdmissionAttributes {
  resource: GroupVersionResource;
  subResource: string;
  kind: GroupVersionKind;
  name: string;
  /** '' for cluster-scoped resources. For a Namespace, kube passes the request path's namespace (its name). */
  namespace: string;
  operation: AdmissionOperation;
  userInfo: UserInfo;
  object: KubeObject | null;
  oldObject: KubeObject | null;
  /** CreateOptions/UpdateOptions/PatchOptions/DeleteOptions as kube sends them. */
  options: JsonObject | null;
  dryRun: boolean;
  clusterScoped: boolean;
}

// admissionregistration.k8s.io/v1 webhooks. Stored objects may come without API defaults, so every
// optional field is optional here and defaulted where it is read (see the *Of helpers below).
const labelSelector = z.object({
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z
    .array(z.object({ key: z.string(), operator: z.string(), values: z.array(z.string()).optional() }))
    .optional(),
});

const ruleSchema = z.object({
  operations: z.array(z.string()).optional(),
  apiGroups: z.array(z.string()).optional(),
  apiVersions: z.array(z.string()).optional(),
  resources: z.array(z.string()).optional(),
  scope: z.string().optional(),
});

const webhookSchema = z.object({
  name: z.string(),
  clientConfig: z.object({
    url: z.string().optional(),
    service: z
      .object({
        namespace: z.string(),
        name: z.string(),
        path: z.string().optional(),
        port: z.number().int().optional(),
      })
      .optional(),
    caBundle: z.string().optional(),
  }),
  rules: z.array(ruleSchema).optional(),
  failurePolicy: z.string().optional(),
  matchPolicy: z.string().optional(),
  namespaceSelector: labelSelector.optional(),
  objectSelector: labelSelector.optional(),
  sideEffects: z.string().optional(),
  timeoutSeconds: z.number().int().optional(),
  admissionReviewVersions: z.array(z.string()).optional(),
  reinvocationPolicy: z.string().optional(),
  matchConditions: z.array(z.object({ name: z.string(), expression: z.string() })).optional(),
});

const configurationSchema = z.object({
  metadata: z.object({ name: z.string() }),
  webhooks: z.array(webhookSchema).optional(),
});

export type Webhook = z.infer<typeof webhookSchema>;
export type Rule = z.infer<typeof ruleSchema>;

/** One webhook of one configuration, as kube's WebhookAccessor. */
export interface WebhookAccessor {
  /** Identity for reinvocation bookkeeping: configuration, webhook name, position. */
  uid: string;
  configurationName: string;
  webhook: Webhook;
}

// API defaults (SetDefaults_MutatingWebhook / SetDefaults_ValidatingWebhook).
export const failurePolicyOf = (w: Webhook): string => w.failurePolicy ?? 'Fail';
export const timeoutSecondsOf = (w: Webhook): number => w.timeoutSeconds ?? 10;
export const reinvocationPolicyOf = (w: Webhook): string => w.reinvocationPolicy ?? 'Never';

/** JSON null means "absent" for every field of these APIs, as in Go's decoder. */
function dropNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(dropNulls);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== null) out[k] = dropNulls(v);
  return out;
}

/**
 * The webhooks of Mutating/ValidatingWebhookConfigurations in kube's order: configurations sorted by
 * name, then webhooks in their listed order. A configuration the API server would never have stored is a
 * 500 that names it, rather than a silently different chain.
 */
export function webhookAccessors(configs: KubeObject[], configKind: string): WebhookAccessor[] {
  const parsed = configs.map((c) => {
    const result = configurationSchema.safeParse(dropNulls(c));
    if (!result.success) {
      const issues = result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
      throw internalError(`invalid ${configKind} "${c.metadata.name ?? ''}": ${issues}`);
    }
    return result.data;
  });
  parsed.sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
  return parsed.flatMap((c) =>
    (c.webhooks ?? []).map((webhook, i) => ({
      uid: `${c.metadata.name}/${webhook.name}/${i}`,
      configurationName: c.metadata.name,
      webhook,
    })),
  );
}

/**
 * rules.IsExemptAdmissionConfigurationResource: webhooks never see the objects that configure admission,
 * so a broken webhook can always be removed.
 */
export function isExemptFromWebhooks(kind: GroupVersionKind): boolean {
  return (
    kind.group === 'admissionregistration.k8s.io' &&
    [
      'ValidatingWebhookConfiguration',
      'MutatingWebhookConfiguration',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
      'MutatingAdmissionPolicy',
      'MutatingAdmissionPolicyBinding',
    ].includes(kind.kind)
  );
}

const exactOrWildcard = (items: string[] | undefined, requested: string): boolean =>
  (items ?? []).some((item) => item === '*' || item === requested);

const isNamespaceResource = (gvr: GroupVersionResource): boolean =>
  gvr.group === '' && gvr.version === 'v1' && gvr.resource === 'namespaces';

/** predicates/rules Matcher.scope: a Namespace is cluster-scoped even though its request names a namespace. */
function scopeMatches(rule: Rule, attrs: AdmissionAttributes): boolean {
  switch (rule.scope ?? '*') {
    case '*':
      return true;
    case 'Namespaced':
      return !isNamespaceResource(attrs.resource) && attrs.namespace !== '';
    case 'Cluster':
      return isNamespaceResource(attrs.resource) || attrs.namespace === '';
    default:
      return false;
  }
}

// predicates/rules Matcher.resource: `pods` never matches a subresource; `*/*`, `pods/*` and `*/status` do.
function resourceMatches(rule: Rule, attrs: AdmissionAttributes): boolean {
  return (rule.resources ?? []).some((entry) => {
    const slash = entry.indexOf('/');
    const res = slash < 0 ? entry : entry.slice(0, slash);
    const sub = slash < 0 ? '' : entry.slice(slash + 1);
    return (res === '*' || res === attrs.resource.resource) && (sub === '*' || sub === attrs.subResource);
  });
}

/**
 * predicates/rules Matcher.Matches. matchPolicy Equivalent also tries the other versions/groups of the
 * same resource; the sandbox serves one version per resource, so Equivalent is the same as Exact here.
 */
export function ruleMatches(rule: Rule, attrs: AdmissionAttributes): boolean {
  return (
    scopeMatches(rule, attrs) &&
    exactOrWildcard(rule.operations, attrs.operation) &&
    exactOrWildcard(rule.apiGroups, attrs.resource.group) &&
    exactOrWildcard(rule.apiVersions, attrs.resource.version) &&
    resourceMatches(rule, attrs)
  );
}

type SelectorObject = NonNullable<Webhook['namespaceSelector']>;

const isEmptySelector = (s: SelectorObject | undefined): boolean =>
  !s || (Object.keys(s.matchLabels ?? {}).length === 0 && (s.matchExpressions ?? []).length === 0);

/** A selector the API server could not parse is an internal error, as LabelSelectorAsSelector's error is. */
function selects(selector: SelectorObject, labels: Record<string, string> | undefined): boolean {
  try {
    return matchesLabelSelectorObject(selector, labels);
  } catch (err) {
    throw internalError(err instanceof Error ? err.message : String(err));
  }
}

/**
 * predicates/namespace MatchNamespaceSelector. Cluster-scoped objects other than Namespaces always match;
 * a Namespace being created or updated is matched on its own labels; a missing namespace is kube's 404.
 */
export function namespaceSelectorMatches(
  webhook: Webhook,
  attrs: AdmissionAttributes,
  getNamespace: (name: string) => KubeObject | undefined,
): boolean {
  const isNamespaces = attrs.resource.resource === 'namespaces';
  if (attrs.namespace === '' && !isNamespaces) return true;
  const selector = webhook.namespaceSelector;
  if (!selector || isEmptySelector(selector)) return true;
  if (
    isNamespaces &&
    attrs.subResource === '' &&
    (attrs.operation === 'CREATE' || attrs.operation === 'UPDATE')
  ) {
    return selects(selector, attrs.object?.metadata.labels);
  }
  // Callers may pass '' for a Namespace's own namespace; kube's request path carries its name there.
  const name = attrs.namespace !== '' ? attrs.namespace : attrs.name;
  const namespace = getNamespace(name);
  if (!namespace) throw notFoundError('namespaces', name);
  return selects(selector, namespace.metadata.labels);
}

/** predicates/object MatchObjectSelector: the new or the old object's labels; absent objects never match. */
export function objectSelectorMatches(webhook: Webhook, attrs: AdmissionAttributes): boolean {
  const selector = webhook.objectSelector;
  if (!selector || isEmptySelector(selector)) return true;
  return [attrs.object, attrs.oldObject].some((o) => o !== null && selects(selector, o.metadata.labels));
}

// matchConditions: CEL over `object`, `oldObject` and `request` (as kube's CEL admission request).
// `authorizer` is not offered: an expression using it fails to evaluate and failurePolicy decides.
const celEnvironment = new Environment()
  .registerVariable('object', 'dyn')
  .registerVariable('oldObject', 'dyn')
  .registerVariable('request', 'dyn');
const compiled = new Map<string, ParseResult | Error>();

function compile(expression: string): ParseResult | Error {
  let program = compiled.get(expression);
  if (!program) {
    try {
      program = celEnvironment.parse(expression);
    } catch (err) {
      program = err instanceof Error ? err : new Error(String(err));
    }
    compiled.set(expression, program);
  }
  return program;
}

/** JSON integers are CEL ints (int64 in kube's unstructured objects), so `spec.replicas > 2` type-checks. */
function toCel(value: unknown): unknown {
  if (typeof value === 'number') return Number.isInteger(value) ? BigInt(value) : value;
  if (Array.isArray(value)) return value.map(toCel);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = toCel(v);
    return out;
  }
  return value;
}

const firstLine = (err: Error): string => {
  const summary = (err as Error & { summary?: unknown }).summary;
  return typeof summary === 'string' ? summary : (err.message.split('\n')[0] ?? '');
};

export type ConditionsResult = { matches: true } | { matches: false } | { error: string };

/**
 * matchconditions matcher.Match: any false skips the webhook (even next to errors); otherwise errors are
 * reported for failurePolicy to decide; all true calls it.
 */
export function evaluateMatchConditions(
  conditions: { name: string; expression: string }[],
  variables: { object: KubeObject | null; oldObject: KubeObject | null; request: JsonObject },
): ConditionsResult {
  const activation = {
    object: toCel(variables.object),
    oldObject: toCel(variables.oldObject),
    request: toCel(variables.request),
  };
  const errors: string[] = [];
  for (const { expression } of conditions) {
    const program = compile(expression);
    if (program instanceof Error) {
      errors.push(`compilation error: ${firstLine(program)}`);
      continue;
    }
    let value: unknown;
    try {
      value = program(activation);
    } catch (err) {
      errors.push(
        `expression '${expression}' resulted in error: ${firstLine(err instanceof Error ? err : new Error(String(err)))}`,
      );
      continue;
    }
    if (value === false) return { matches: false };
    if (value !== true) errors.push(`expression '${expression}' resulted in error: expected a bool result`);
  }
  return errors.length > 0 ? { error: aggregateMessage(errors) } : { matches: true };
}

export interface HookMatchInput {
  attrs: AdmissionAttributes;
  /** The object as the previous mutating webhooks left it; matchConditions see this one (kube's versioned object). */
  current: KubeObject | null;
  /** kube's CEL `request` variable. */
  request: JsonObject;
  getNamespace: (name: string) => KubeObject | undefined;
}

/**
 * generic.Webhook.ShouldCallHook. Selector errors only surface when a rule matches, as in kube; a
 * matchConditions error under failurePolicy Fail is a 403 without calling the webhook.
 * Selectors see `attrs.object` (the object at the start of this webhook round), as kube's do.
 */
export function shouldCallHook(webhook: Webhook, input: HookMatchInput): boolean {
  const { attrs } = input;
  let nsError: StatusError | undefined;
  let nsMatches = false;
  try {
    nsMatches = namespaceSelectorMatches(webhook, attrs, input.getNamespace);
  } catch (err) {
    nsError = err as StatusError;
  }
  if (!nsMatches && !nsError) return false;
  let objError: StatusError | undefined;
  let objMatches = false;
  try {
    objMatches = objectSelectorMatches(webhook, attrs);
  } catch (err) {
    objError = err as StatusError;
  }
  if (!objMatches && !objError) return false;
  if (!(webhook.rules ?? []).some((rule) => ruleMatches(rule, attrs))) return false;
  if (nsError) throw nsError;
  if (objError) throw objError;
  const conditions = webhook.matchConditions ?? [];
  if (conditions.length === 0) return true;
  const result = evaluateMatchConditions(conditions, {
    object: input.current,
    oldObject: attrs.oldObject,
    request: input.request,
  });
  if ('error' in result) {
    if (failurePolicyOf(webhook) === 'Ignore') return false;
    throw forbiddenError(attrs.resource, attrs.name, result.error);
  }
  return result.matches;
}
