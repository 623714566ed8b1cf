// The operator's RBAC for deploy/, assembled from the domain modules' rule data (src/berth/rbac.ts,
// src/nodetaint/rbac.ts) plus the rules of the pieces that have no RBAC module yet (leader election, the
// webhook certificates, WorkloadAdmission's reads), each derived from the constants the code itself uses,
// so that the manifests and the code cannot disagree. Least privilege: a name is given (resourceNames)
// wherever Kubernetes can check one; `create` and unnamed list/watch cannot be name-scoped.
//
// Five layers, matching the kustomize base and components:
//   base           every install: BerthLeases, WorkloadAdmission's reads, the registration of the webhook
//                  configurations, the opt-in admission scope (its own role), leader election
//   secureMetrics  `--metrics-secure` (on in every install, in the base too; a chart can leave it out):
//                  the operator's reviews of each scrape, and the ClusterRole scrapers are bound to
//   selfsigned     the CA Secret (the cert-manager install mounts cert-manager's Secret instead)
//   nodeTaint      the node taint guard (opt-in)
//   injection      helper injection (opt-in): the registration of its two webhook configurations
// A rule that an earlier layer (or an earlier rule of the same layer) already grants in full is dropped and
// listed, so no permission is granted twice and every remaining rule is needed (test/integration/deploy).
import type {
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1PolicyRule,
  V1Role,
  V1RoleBinding,
} from '@kubernetes/client-node';
import { DEFAULT_CA_NAME } from '../certs/issue.ts';
import { admissionScopeRules, berthLeaseRbacObjects } from '../src/berth/rbac.ts';
import { RUN_FLAGS } from '../src/config.ts';
import { DEFAULT_INJECTION_CONFIGURATION_NAME } from '../src/injection/configurations.ts';
import { METRICS_ACCESS } from '../src/kube/metrics-auth.ts';
import { nodeTaintRbacObjects } from '../src/nodetaint/rbac.ts';
import { KINDS } from '../src/workloads/model.ts';
import { DEFAULT_CONFIGURATION_NAME } from '../webhooks/configurations.ts';

export const OPERATOR_NAMESPACE = 'berth-system';
export const SERVICE_ACCOUNT = 'berth-operator';
export const APP_NAME = 'berth-operator';
/** The agent DaemonSet's namespace in the node-taint-guard component (aether's default). */
export const AGENT_NAMESPACE = 'aether-system';
export const LEADER_ELECTION_ID = RUN_FLAGS['leader-election-id'].default;
export const CA_SECRET_NAME = DEFAULT_CA_NAME;
export const WEBHOOK_CONFIGURATION_NAME = DEFAULT_CONFIGURATION_NAME;
/** The injection webhook configurations and the ClusterRole that owns them (the injection component). */
export const INJECTION_CONFIGURATION_NAME = DEFAULT_INJECTION_CONFIGURATION_NAME;
/** Bound to the operator: the reviews of each scrape. */
export const METRICS_AUTH_ROLE = 'berth-operator-metrics-auth';
/** For scrapers to bind (the install binds it to no one). */
export const METRICS_READER_ROLE = 'berth-operator-metrics-reader';

const RBAC_API = 'rbac.authorization.k8s.io';
export type RbacObject = V1ClusterRole | V1ClusterRoleBinding | V1Role | V1RoleBinding;
export type RoleObject = V1ClusterRole | V1Role;

export const labels = (component: string): Record<string, string> => ({
  'app.kubernetes.io/name': APP_NAME,
  'app.kubernetes.io/component': component,
});

const subject = { kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: OPERATOR_NAMESPACE };

/** A ClusterRole (namespace undefined) or Role with its binding to the operator's service account. */
function role(name: string, component: string, rules: V1PolicyRule[], namespace?: string): RbacObject[] {
  const metadata = { name, ...(namespace === undefined ? {} : { namespace }), labels: labels(component) };
  const kind = namespace === undefined ? 'ClusterRole' : 'Role';
  return [
    { apiVersion: `${RBAC_API}/v1`, kind, metadata, rules },
    {
      apiVersion: `${RBAC_API}/v1`,
      kind: `${kind}Binding`,
      metadata: { ...metadata, labels: { ...metadata.labels } },
      roleRef: { apiGroup: RBAC_API, kind, name },
      subjects: [{ ...subject }],
    },
  ];
}

const ADMISSION_REGISTRATION = 'admissionregistration.k8s.io';
const WEBHOOK_CONFIGURATIONS = ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'];

/**
 * WorkloadAdmission (every replica) resolves owner chains and reads the live target with direct GETs
 * (webhooks/kube-io.ts `getWorkload`), and GETs the Pod of a `pods/binding`. Its BerthLease list/get and
 * status update are the BerthLease controller's rules.
 */
export function admissionReadRules(): V1PolicyRule[] {
  const byGroup = new Map<string, string[]>();
  for (const r of Object.values(KINDS)) byGroup.set(r.group, [...(byGroup.get(r.group) ?? []), r.plural]);
  return [...byGroup].map(([group, resources]) => ({ apiGroups: [group], resources, verbs: ['get'] }));
}

export interface RbacOptions {
  /**
   * `--enable-workload-admission` (default true, as in the installs): the managed-workload path and
   * WorkloadAdmission's roles. The Helm chart renders both variants (`workloadManagement.enabled`).
   */
  workloadAdmission?: boolean;
}

/** The ClusterRole of the opt-in admission scope (src/berth/rbac.ts `admissionScopeRules`). */
export const ADMISSION_SCOPE_ROLE = 'berth-operator-admission-scope';

/** The base layer: the objects every install has. */
export function baseRbac({ workloadAdmission = true }: RbacOptions = {}): RbacObject[] {
  const berth = berthLeaseRbacObjects({
    name: APP_NAME,
    serviceAccount: { namespace: OPERATOR_NAMESPACE, name: SERVICE_ACCOUNT },
    labels: labels('berthlease-controller'),
    // WorkloadAdmission turns on the managed-workload path.
    managedWorkloads: workloadAdmission,
  });
  const admission = [
    ...role('berth-operator-admission', 'workload-admission', admissionReadRules()),
    // Named like the configurations it owns: deleting it (uninstalling) deletes them (webhooks/registration.ts).
    ...role(WEBHOOK_CONFIGURATION_NAME, 'workload-admission', webhookRegistrationRules()),
    ...role(
      'berth-operator-webhook-endpoints',
      'workload-admission',
      [webhookEndpointsRule()],
      OPERATOR_NAMESPACE,
    ),
  ];
  // The opt-in scope's role stands alone, so that the cluster-wide mode (the kustomize component
  // all-namespaces, the chart's workloadManagement.admissionScope=all) can leave it out.
  const scope = role(ADMISSION_SCOPE_ROLE, 'admission-scope', [...admissionScopeRules]);
  return [
    ...berth,
    ...(workloadAdmission ? [...admission, ...scope] : []),
    // src/kube/leader.ts: read, create when absent, renew/take over/release by update, and a candidate's
    // watch of that one Lease (list/watch with fieldSelector metadata.name, authorized by resourceNames).
    ...role(
      'berth-operator-leader-election',
      'leader-election',
      [
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          resourceNames: [LEADER_ELECTION_ID],
          verbs: ['get', 'list', 'update', 'watch'],
        },
      ],
      OPERATOR_NAMESPACE,
    ),
  ];
}

/** The Mutating and Validating webhook configurations named `names`, for `verbs`. */
export function webhookConfigurationRule(names: readonly string[], verbs: readonly string[]): V1PolicyRule {
  return {
    apiGroups: [ADMISSION_REGISTRATION],
    resources: WEBHOOK_CONFIGURATIONS,
    resourceNames: [...names],
    verbs: [...verbs],
  };
}

/** Each replica's CA Secret rules (certs/ca-store.ts): create it when absent, read and rotate it by name. */
export function caSecretRules(secretName: string = CA_SECRET_NAME): V1PolicyRule[] {
  return [
    { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
    { apiGroups: [''], resources: ['secrets'], resourceNames: [secretName], verbs: ['get', 'update'] },
  ];
}

/**
 * The webhook configurations' rules: every replica's start-up check GETs them
 * (webhooks/configurations.ts); the leader's registration (webhooks/registration.ts) creates them (create
 * cannot be name-scoped), watches them (a metadata.name field selector, authorized against resourceNames),
 * updates them, and GETs their owner, the ClusterRole of the same name.
 */
export function webhookRegistrationRules(name: string = WEBHOOK_CONFIGURATION_NAME): V1PolicyRule[] {
  return [
    { apiGroups: [ADMISSION_REGISTRATION], resources: WEBHOOK_CONFIGURATIONS, verbs: ['create'] },
    webhookConfigurationRule([name], ['get', 'list', 'watch', 'update']),
    { apiGroups: [RBAC_API], resources: ['clusterroles'], resourceNames: [name], verbs: ['get'] },
  ];
}

/** The registration waits for a ready endpoint of the webhook Service (its EndpointSlices, by label). */
export function webhookEndpointsRule(): V1PolicyRule {
  return { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] };
}

/**
 * `--metrics-secure` (src/observability/metrics-auth.ts): a TokenReview and a SubjectAccessReview per
 * scrape not answered from the cache. They are the two rules of the built-in ClusterRole
 * `system:auth-delegator`, which controller-runtime's scaffold binds; an own role grants no more, and
 * unlike a binding to a built-in role it is part of the install: its tests see (and prove needed) every
 * rule, and it cannot grow with what a cluster's version puts into the built-in one.
 */
export function metricsAuthRules(): V1PolicyRule[] {
  return [
    { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
  ];
}

/** The operator's review rules, in a ClusterRole bound to its service account. */
export function metricsAuthRbac(): RbacObject[] {
  return role(METRICS_AUTH_ROLE, 'metrics', metricsAuthRules());
}

/** What a scraper needs: `get` on the non-resource URL /metrics. Bind it to the scraper's identity. */
export function metricsReaderRole(): V1ClusterRole {
  return {
    apiVersion: `${RBAC_API}/v1`,
    kind: 'ClusterRole',
    metadata: { name: METRICS_READER_ROLE, labels: labels('metrics') },
    rules: [{ nonResourceURLs: [METRICS_ACCESS.path], verbs: [METRICS_ACCESS.verb] }],
  };
}

/** The secure-metrics layer: the operator's review rules and the scrapers' reader role. */
export function secureMetricsRbac(): RbacObject[] {
  return [...metricsAuthRbac(), metricsReaderRole()];
}

/** The selfsigned component: the CA Secret (certs/ca-store.ts). */
export function selfSignedRbac(): RbacObject[] {
  return [...role('berth-operator-webhook-ca', 'webhook-certificates', caSecretRules(), OPERATOR_NAMESPACE)];
}

/** The node-taint-guard component, from src/nodetaint/rbac.ts. */
export function nodeTaintGuardRbac(): RbacObject[] {
  return nodeTaintRbacObjects({
    name: 'berth-operator-node-taint-guard',
    agentNamespace: AGENT_NAMESPACE,
    subject: { kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: OPERATOR_NAMESPACE },
    labels: labels('node-taint-guard'),
  });
}

/**
 * The injection component (`--enable-injection-webhook`): the leader registers the injection webhook
 * configurations exactly as WorkloadAdmission's (webhooks/registration.ts), owned by the ClusterRole of
 * their name, so uninstalling the component removes them. Its handlers decide from the review alone and
 * read nothing. What the base already grants (creating configurations, the Service's EndpointSlices, with
 * workload admission on) is left out.
 */
export function injectionRbac(): RbacObject[] {
  return [
    ...role(
      INJECTION_CONFIGURATION_NAME,
      'injection',
      webhookRegistrationRules(INJECTION_CONFIGURATION_NAME),
    ),
    ...role('berth-operator-injection-endpoints', 'injection', [webhookEndpointsRule()], OPERATOR_NAMESPACE),
  ];
}

// ---- rule subsumption ----

const isRole = (o: RbacObject): o is RoleObject => o.kind === 'ClusterRole' || o.kind === 'Role';
const isBinding = (o: RbacObject): o is V1ClusterRoleBinding | V1RoleBinding =>
  o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding';
const all = (list: string[] | undefined, within: string[] | undefined): boolean =>
  (list ?? []).every((v) => (within ?? []).includes(v) || (within ?? []).includes('*'));

/** Whether `b` (granted in scope `bNs`, undefined = cluster-wide) grants everything `a` grants in `aNs`. */
export function ruleCovers(
  b: V1PolicyRule,
  bNs: string | undefined,
  a: V1PolicyRule,
  aNs: string | undefined,
) {
  if (bNs !== undefined && bNs !== aNs) return false;
  if ((a.nonResourceURLs ?? []).length > 0 || (b.nonResourceURLs ?? []).length > 0) return false;
  const bNames = b.resourceNames ?? [];
  const aNames = a.resourceNames ?? [];
  const names = bNames.length === 0 || (aNames.length > 0 && aNames.every((n) => bNames.includes(n)));
  return names && all(a.apiGroups, b.apiGroups) && all(a.resources, b.resources) && all(a.verbs, b.verbs);
}

/**
 * A rule split into single permissions: one group, resource, verb and (if any) name each. A non-resource
 * rule stays whole: ruleCovers never drops one (the reader role's is not even the operator's).
 */
function cells(rule: V1PolicyRule): V1PolicyRule[] {
  if ((rule.nonResourceURLs ?? []).length > 0) return [rule];
  const out: V1PolicyRule[] = [];
  for (const group of rule.apiGroups ?? [])
    for (const resource of rule.resources ?? [])
      for (const verb of rule.verbs ?? [])
        for (const name of rule.resourceNames?.length ? rule.resourceNames : [undefined])
          out.push({
            apiGroups: [group],
            resources: [resource],
            verbs: [verb],
            ...(name === undefined ? {} : { resourceNames: [name] }),
          });
  return out;
}

export interface DroppedRule {
  role: string;
  rule: V1PolicyRule;
  grantedBy: string;
}

const describeRole = (o: RoleObject): string =>
  `${o.kind} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name ?? ''}`;

/**
 * `layer` without the rules whose every permission `granted` (earlier layers) or earlier rules of `layer`
 * already grant, and without Roles left empty (and their bindings). The roles are the operator's (the
 * metrics reader's only rule is a non-resource one, which is never dropped).
 */
export function withoutGrantedRules(
  layer: RbacObject[],
  granted: RbacObject[],
): { objects: RbacObject[]; dropped: DroppedRule[] } {
  const dropped: DroppedRule[] = [];
  const kept: RoleObject[] = granted.filter(isRole);
  const out: RbacObject[] = [];
  const emptied = new Set<string>();
  for (const o of layer) {
    if (!isRole(o)) {
      out.push(o);
      continue;
    }
    const ns = o.kind === 'Role' ? o.metadata?.namespace : undefined;
    const rules: V1PolicyRule[] = [];
    for (const rule of o.rules ?? []) {
      const grantors = [...kept, { ...o, rules }];
      // Which role grants each single permission of the rule (undefined: none does yet).
      const by = cells(rule).map((cell) =>
        grantors.find((k) =>
          (k.rules ?? []).some((r) =>
            ruleCovers(r, k.kind === 'Role' ? k.metadata?.namespace : undefined, cell, ns),
          ),
        ),
      );
      if (by.some((k) => k === undefined)) rules.push(rule);
      else {
        const names = [...new Set(by.map((k) => describeRole(k as RoleObject)))];
        dropped.push({ role: describeRole(o), rule, grantedBy: names.join(' and ') });
      }
    }
    const next = { ...o, rules };
    kept.push(next);
    if (rules.length === 0) emptied.add(`${o.kind}/${ns ?? ''}/${o.metadata?.name}`);
    else out.push(next);
  }
  const bindingOf = (b: RbacObject): string | undefined =>
    isBinding(b)
      ? `${b.roleRef.kind}/${b.kind === 'RoleBinding' ? (b.metadata?.namespace ?? '') : ''}/${b.roleRef.name}`
      : undefined;
  return { objects: out.filter((o) => !emptied.has(bindingOf(o) ?? '')), dropped };
}

export interface RbacLayers {
  base: { objects: RbacObject[]; dropped: DroppedRule[] };
  secureMetrics: { objects: RbacObject[]; dropped: DroppedRule[] };
  selfSigned: { objects: RbacObject[]; dropped: DroppedRule[] };
  nodeTaintGuard: { objects: RbacObject[]; dropped: DroppedRule[] };
  injection: { objects: RbacObject[]; dropped: DroppedRule[] };
}

/** The layers, each reduced against what the layers it is always combined with grant. */
export function rbacLayers(options: RbacOptions = {}): RbacLayers {
  const base = withoutGrantedRules(baseRbac(options), []);
  return {
    base,
    secureMetrics: withoutGrantedRules(secureMetricsRbac(), base.objects),
    selfSigned: withoutGrantedRules(selfSignedRbac(), base.objects),
    nodeTaintGuard: withoutGrantedRules(nodeTaintGuardRbac(), base.objects),
    injection: withoutGrantedRules(injectionRbac(), base.objects),
  };
}
