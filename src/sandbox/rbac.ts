// RBAC authorization with kube-apiserver's semantics (plugin/pkg/auth/authorizer/rbac/rbac.go,
// pkg/registry/rbac/validation/rule.go, pkg/apis/rbac/v1/evaluation_helpers.go) and its 403 text
// (apiserver endpoints/handlers/responsewriters/errors.go + apimachinery errors.NewForbidden).
// Pure functions: the server hands in the stored RBAC objects on every call.
import { type LabelSelectorObject, matchesLabelSelectorObject } from './selectors.ts';
import { type KubeObject, type StatusDetails, StatusError, type UserInfo } from './types.ts';

export interface AuthorizationAttributes {
  user: UserInfo;
  /** get list watch create update patch delete deletecollection, plus bind/escalate/impersonate... */
  verb: string;
  apiGroup: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
  resourceRequest: boolean;
  /** The request path, matched for non-resource requests (e.g. /healthz, /version). */
  path: string;
}

export interface RbacObjects {
  roles(namespace: string): KubeObject[];
  clusterRoles(): KubeObject[];
  roleBindings(namespace: string): KubeObject[];
  clusterRoleBindings(): KubeObject[];
}

export interface PolicyRule {
  verbs?: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

interface RoleRef {
  kind: string;
  name: string;
}

const RBAC_GROUP = 'rbac.authorization.k8s.io';
/** user.SystemPrivilegedGroup: kube-apiserver puts a privileged-group authorizer in front of RBAC. */
export const SYSTEM_MASTERS = 'system:masters';

// Stored objects are unvalidated JSON, so every field is read defensively.
const strings = (v: unknown): string[] =>
  Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : [];
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const record = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

function rulesOf(obj: KubeObject): PolicyRule[] {
  if (!Array.isArray(obj.rules)) return [];
  return obj.rules.map((r) => {
    const rule = record(r);
    return {
      verbs: strings(rule.verbs),
      apiGroups: strings(rule.apiGroups),
      resources: strings(rule.resources),
      resourceNames: strings(rule.resourceNames),
      nonResourceURLs: strings(rule.nonResourceURLs),
    };
  });
}

function subjectsOf(binding: KubeObject): Subject[] {
  if (!Array.isArray(binding.subjects)) return [];
  return binding.subjects.map((s) => {
    const subject = record(s);
    return { kind: str(subject.kind), name: str(subject.name), namespace: str(subject.namespace) };
  });
}

function roleRefOf(binding: KubeObject): RoleRef {
  const ref = record(binding.roleRef);
  return { kind: str(ref.kind), name: str(ref.name) };
}

// --- rule matching (rbacv1helpers + RuleAllows) ---------------------------------------------------

export function ruleAllows(attrs: AuthorizationAttributes, rule: PolicyRule): boolean {
  const verbs = rule.verbs ?? [];
  if (!verbs.some((v) => v === '*' || v === attrs.verb)) return false;
  if (!attrs.resourceRequest) {
    return (rule.nonResourceURLs ?? []).some(
      (url) =>
        url === '*' ||
        url === attrs.path ||
        (url.endsWith('*') && attrs.path.startsWith(url.replace(/\*+$/, ''))),
    );
  }
  if (!(rule.apiGroups ?? []).some((g) => g === '*' || g === attrs.apiGroup)) return false;
  const combined = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
  const resourceMatches = (rule.resources ?? []).some(
    (r) => r === '*' || r === combined || (attrs.subresource !== '' && r === `*/${attrs.subresource}`),
  );
  if (!resourceMatches) return false;
  // An empty requested name (list, watch, create, deletecollection) never matches a resourceNames rule.
  const names = rule.resourceNames ?? [];
  return names.length === 0 || names.includes(attrs.name);
}

// --- subjects -----------------------------------------------------------------------------------

function appliesToUser(user: UserInfo, subject: Subject, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case 'User':
      return user.username === subject.name;
    case 'Group':
      return user.groups.includes(subject.name);
    case 'ServiceAccount': {
      // A RoleBinding may leave the SA namespace empty to mean its own namespace.
      const ns = subject.namespace || bindingNamespace;
      if (!ns) return false;
      return user.username === `system:serviceaccount:${ns}:${subject.name}`;
    }
    default:
      return false;
  }
}

function describeSubject(s: Subject, bindingNamespace: string): string {
  if (s.kind === 'ServiceAccount')
    return `${s.kind} ${goQuote(`${s.name}/${s.namespace || bindingNamespace}`)}`;
  return `${s.kind} ${goQuote(s.name)}`;
}

// --- role resolution, including ClusterRole aggregation -------------------------------------------

/**
 * The rules a ClusterRole grants. An aggregated role is what the clusterrole-aggregation controller
 * would converge to: the deduplicated union of the rules of the ClusterRoles its selectors match
 * (sorted by name, itself excluded), replacing its own rules. Computed here so it never lags.
 */
export function effectiveClusterRoleRules(
  role: KubeObject,
  all: KubeObject[],
  visiting = new Set<string>(),
): PolicyRule[] {
  if (role.aggregationRule === null || typeof role.aggregationRule !== 'object') return rulesOf(role);
  const aggregation = record(role.aggregationRule);
  const name = role.metadata.name ?? '';
  visiting.add(name);
  const selectors = Array.isArray(aggregation.clusterRoleSelectors) ? aggregation.clusterRoleSelectors : [];
  const sorted = [...all].sort((a, b) => ((a.metadata.name ?? '') < (b.metadata.name ?? '') ? -1 : 1));
  const out: PolicyRule[] = [];
  const seen = new Set<string>();
  for (const selector of selectors) {
    for (const candidate of sorted) {
      const candidateName = candidate.metadata.name ?? '';
      // Cycles through other aggregated roles contribute nothing rather than recursing forever.
      if (candidateName === name || visiting.has(candidateName)) continue;
      if (!selectorMatches(selector as LabelSelectorObject, candidate.metadata.labels)) continue;
      for (const rule of effectiveClusterRoleRules(candidate, all, visiting)) {
        const key = JSON.stringify(rule);
        if (!seen.has(key)) {
          seen.add(key);
          out.push(rule);
        }
      }
    }
  }
  visiting.delete(name);
  return out;
}

function selectorMatches(selector: LabelSelectorObject, labels: Record<string, string> | undefined): boolean {
  try {
    return matchesLabelSelectorObject(selector, labels);
  } catch {
    // The controller skips a role whose selector does not parse; so do we.
    return false;
  }
}

type Resolved = { rules: PolicyRule[] } | { error: string };

function resolveRoleRef(ref: RoleRef, bindingNamespace: string, rbac: RbacObjects): Resolved {
  switch (ref.kind) {
    case 'Role': {
      const role = bindingNamespace
        ? rbac.roles(bindingNamespace).find((r) => r.metadata.name === ref.name)
        : undefined;
      if (!role) return { error: `role.${RBAC_GROUP} ${goQuote(ref.name)} not found` };
      return { rules: rulesOf(role) };
    }
    case 'ClusterRole': {
      const all = rbac.clusterRoles();
      const role = all.find((r) => r.metadata.name === ref.name);
      if (!role) return { error: `clusterrole.${RBAC_GROUP} ${goQuote(ref.name)} not found` };
      return { rules: effectiveClusterRoleRules(role, all) };
    }
    default:
      return { error: `unsupported role reference kind: ${goQuote(ref.kind)}` };
  }
}

// --- the authorizer -------------------------------------------------------------------------------

/**
 * Decides a request like kube-apiserver's privileged-group + RBAC authorizers. The reason is what the
 * server appends to a 403 (`RBAC: <resolution errors>`) or logs on allow (`RBAC: allowed by ...`).
 */
export function authorize(
  attrs: AuthorizationAttributes,
  rbac: RbacObjects,
): { allowed: boolean; reason: string } {
  if (attrs.user.groups.includes(SYSTEM_MASTERS)) return { allowed: true, reason: '' };
  const errors: string[] = [];

  for (const binding of rbac.clusterRoleBindings()) {
    const subjects = subjectsOf(binding);
    const subject = subjects.find((s) => appliesToUser(attrs.user, s, ''));
    if (!subject) continue;
    const ref = roleRefOf(binding);
    const resolved = resolveRoleRef(ref, '', rbac);
    if ('error' in resolved) {
      errors.push(resolved.error);
      continue;
    }
    if (resolved.rules.some((rule) => ruleAllows(attrs, rule))) {
      const source = `ClusterRoleBinding ${goQuote(binding.metadata.name ?? '')} of ${ref.kind} ${goQuote(ref.name)} to ${describeSubject(subject, '')}`;
      return { allowed: true, reason: `RBAC: allowed by ${source}` };
    }
  }

  if (attrs.namespace) {
    for (const binding of rbac.roleBindings(attrs.namespace)) {
      const subject = subjectsOf(binding).find((s) => appliesToUser(attrs.user, s, attrs.namespace));
      if (!subject) continue;
      const ref = roleRefOf(binding);
      // A RoleBinding to a ClusterRole grants its rules inside this namespace only: it is only
      // consulted for requests in the binding's namespace.
      const resolved = resolveRoleRef(ref, attrs.namespace, rbac);
      if ('error' in resolved) {
        errors.push(resolved.error);
        continue;
      }
      if (resolved.rules.some((rule) => ruleAllows(attrs, rule))) {
        const bindingName = `${binding.metadata.name ?? ''}/${attrs.namespace}`;
        const source = `RoleBinding ${goQuote(bindingName)} of ${ref.kind} ${goQuote(ref.name)} to ${describeSubject(subject, attrs.namespace)}`;
        return { allowed: true, reason: `RBAC: allowed by ${source}` };
      }
    }
  }

  return { allowed: false, reason: errors.length > 0 ? `RBAC: ${aggregateErrors(errors)}` : '' };
}

/** utilerrors.NewAggregate(...).Error(): one message bare, several de-duplicated in brackets. */
function aggregateErrors(errors: string[]): string {
  if (errors.length === 1) return errors[0] as string;
  const unique = [...new Set(errors)];
  return unique.length === 1 ? (unique[0] as string) : `[${unique.join(', ')}]`;
}

// --- the 403 --------------------------------------------------------------------------------------

/**
 * 403 Forbidden Status exactly like kube-apiserver, e.g. `pods "x" is forbidden: User "u" cannot get
 * resource "pods" in API group "" in the namespace "ns"`, or `... at the cluster scope`; subresources read
 * `resource "pods/status"`, a request without a name `pods is forbidden: ...`, a non-resource request
 * `forbidden: User "u" cannot get path "/foo"`. A non-empty authorizer reason is appended after `: `.
 * Details carry name, group and kind (= resource), empty values left out as Go's omitempty does.
 */
export function forbiddenError(attrs: AuthorizationAttributes, reason = ''): StatusError {
  const msg = sanitize(forbiddenMessage(attrs));
  const err = reason ? `${msg}: ${reason}` : msg;
  const resource = attrs.resourceRequest ? attrs.resource : '';
  const group = attrs.resourceRequest ? attrs.apiGroup : '';
  const name = attrs.resourceRequest ? attrs.name : '';
  const qualified = group ? `${resource}.${group}` : resource;
  let message: string;
  if (!resource && !group) message = `forbidden: ${err}`;
  else if (!name) message = `${qualified} is forbidden: ${err}`;
  else message = `${qualified} ${goQuote(name)} is forbidden: ${err}`;
  const details: StatusDetails = {};
  if (name) details.name = name;
  if (group) details.group = group;
  if (resource) details.kind = resource;
  return new StatusError(403, 'Forbidden', message, details);
}

function forbiddenMessage(attrs: AuthorizationAttributes): string {
  const user = goQuote(attrs.user.username);
  if (!attrs.resourceRequest) return `User ${user} cannot ${attrs.verb} path ${goQuote(attrs.path)}`;
  const resource = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
  const what = `User ${user} cannot ${attrs.verb} resource ${goQuote(resource)} in API group ${goQuote(attrs.apiGroup)}`;
  return attrs.namespace
    ? `${what} in the namespace ${goQuote(attrs.namespace)}`
    : `${what} at the cluster scope`;
}

/** The apiserver escapes characters that could make an error look like HTML. */
const sanitize = (s: string): string =>
  s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/** Go's %q (strconv.Quote) for the ASCII range; printable Unicode passes through as Go leaves it. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0) as number;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\x07') out += '\\a';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (ch === '\v') out += '\\v';
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

// --- bootstrap policy -----------------------------------------------------------------------------

const bootstrapMeta = (name: string): KubeObject['metadata'] => ({
  name,
  labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' },
  annotations: { 'rbac.authorization.kubernetes.io/autoupdate': 'true' },
});

const clusterRole = (name: string, rules: PolicyRule[]): KubeObject => ({
  apiVersion: `${RBAC_GROUP}/v1`,
  kind: 'ClusterRole',
  metadata: bootstrapMeta(name),
  rules,
});

const clusterRoleBinding = (name: string, groups: string[]): KubeObject => ({
  apiVersion: `${RBAC_GROUP}/v1`,
  kind: 'ClusterRoleBinding',
  metadata: bootstrapMeta(name),
  roleRef: { apiGroup: RBAC_GROUP, kind: 'ClusterRole', name },
  subjects: groups.map((g) => ({ apiGroup: RBAC_GROUP, kind: 'Group', name: g })),
});

/**
 * The bootstrap roles every kube-apiserver creates that matter to a client (bootstrappolicy/policy.go):
 * cluster-admin for system:masters, discovery and self-review for every authenticated user, and the
 * health/version endpoints for everyone. The server seeds these at start.
 */
export function defaultRbacObjects(): { clusterRoles: KubeObject[]; clusterRoleBindings: KubeObject[] } {
  return {
    clusterRoles: [
      clusterRole('cluster-admin', [
        { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
        { nonResourceURLs: ['*'], verbs: ['*'] },
      ]),
      clusterRole('system:discovery', [
        {
          nonResourceURLs: [
            '/api',
            '/api/*',
            '/apis',
            '/apis/*',
            '/healthz',
            '/livez',
            '/openapi',
            '/openapi/*',
            '/readyz',
            '/version',
            '/version/',
          ],
          verbs: ['get'],
        },
      ]),
      clusterRole('system:basic-user', [
        {
          apiGroups: ['authorization.k8s.io'],
          resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'],
          verbs: ['create'],
        },
        { apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'], verbs: ['create'] },
      ]),
      clusterRole('system:public-info-viewer', [
        { nonResourceURLs: ['/healthz', '/livez', '/readyz', '/version', '/version/'], verbs: ['get'] },
      ]),
    ],
    clusterRoleBindings: [
      clusterRoleBinding('cluster-admin', [SYSTEM_MASTERS]),
      clusterRoleBinding('system:discovery', ['system:authenticated']),
      clusterRoleBinding('system:basic-user', ['system:authenticated']),
      clusterRoleBinding('system:public-info-viewer', ['system:authenticated', 'system:unauthenticated']),
    ],
  };
}

/** An RbacObjects view over a flat list of Role/ClusterRole/RoleBinding/ClusterRoleBinding objects. */
export function rbacObjectsFrom(objects: KubeObject[]): RbacObjects {
  const ofKind = (kind: string, namespace?: string) =>
    objects.filter((o) => o.kind === kind && (namespace === undefined || o.metadata.namespace === namespace));
  return {
    roles: (namespace) => ofKind('Role', namespace),
    clusterRoles: () => ofKind('ClusterRole'),
    roleBindings: (namespace) => ofKind('RoleBinding', namespace),
    clusterRoleBindings: () => ofKind('ClusterRoleBinding'),
  };
}
