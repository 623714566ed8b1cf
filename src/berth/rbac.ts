// Least-privilege RBAC of the lease-only BerthLease controller, as data for deploy/ and the
// RBAC-enforcing integration tests. It reads and watches BerthLeases, patches their finalizers
// (resourceVersion-guarded merge patch), replaces their status, and records Events about them. The Go
// chart also grants `update` on berthleases and `get`/`patch` on the status; nothing here uses them.
// The managed-workload path adds its own rules (`managedWorkloadRules`: targets, owners, Pods, Jobs).
import type {
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1PolicyRule,
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { GROUP, PLURAL, SCOPE_ENABLED, SCOPE_LABEL, SCOPE_LEAVING } from './api.ts';

export const berthLeaseRules: readonly V1PolicyRule[] = [
  { apiGroups: [GROUP], resources: [PLURAL], verbs: ['get', 'list', 'watch', 'patch'] },
  { apiGroups: [GROUP], resources: [`${PLURAL}/status`], verbs: ['update'] },
  // Kept for clusters enforcing OwnerReferencesPermissionEnforcement-style checks on finalizers.
  { apiGroups: [GROUP], resources: [`${PLURAL}/finalizers`], verbs: ['update'] },
  { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
];

/**
 * What the managed-workload path (managed-workloads.ts) adds, when `--enable-workload-admission` is on:
 * - targets and owners: `get` (verification, owner chains of Pods) and `patch` of the targets (the
 *   version-guarded scale / suspend writes with the stop fence); ReplicaSets are read as owners and may
 *   be targets; Jobs are read as owners;
 * - Pods: `list`/`watch` (the managed-pods informer, scoped by label), `get`, `list` (permit passes,
 *   drains), `patch` (removing the gate; the webhook lets only this identity do it) and `delete`;
 * - Jobs: `list`/`watch` (managed-jobs), `get`, `patch` (suspend), `delete`.
 * The same identity serves WorkloadAdmission, whose reads (BerthLeases, owners, targets, Pods) and
 * status write (the target's admission record) these rules and `berthLeaseRules` cover.
 */
export const managedWorkloadRules: readonly V1PolicyRule[] = [
  { apiGroups: ['apps'], resources: ['deployments', 'statefulsets', 'replicasets'], verbs: ['get', 'patch'] },
  { apiGroups: ['batch'], resources: ['cronjobs'], verbs: ['get', 'patch'] },
  { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get', 'list', 'watch', 'patch', 'delete'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'patch', 'delete'] },
];

/**
 * What the opt-in admission scope adds (`--workload-admission-scope=opt-in`, the default):
 * - namespaces: `list`/`watch` (the BerthLease controller's informer of the namespaces in scope), `get`
 *   (the live check before an activation), `patch` (the leader labels namespaces that hold managed
 *   workloads into the scope before it narrows the webhooks' selector; the installs' admission policy
 *   `berth-operator-namespace-writes` lets this identity add that one label and change nothing else);
 * - the stamped kinds: `list` (the namespace guard finds a stamped object by label; the switch finds them
 *   cluster-wide). Pods and Jobs are listed by the managed path already.
 */
export const admissionScopeRules: readonly V1PolicyRule[] = [
  { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch', 'patch'] },
  { apiGroups: ['apps'], resources: ['deployments', 'statefulsets', 'replicasets'], verbs: ['list'] },
  { apiGroups: ['batch'], resources: ['cronjobs'], verbs: ['list'] },
];

export interface ServiceAccountRef {
  namespace: string;
  name: string;
}

/** A ClusterRole with the rules and its binding to the operator's service account. */
export function berthLeaseRbacObjects(options: {
  name: string;
  serviceAccount: ServiceAccountRef;
  labels?: Record<string, string>;
  /** Include `managedWorkloadRules` (workload admission enabled). Default false. */
  managedWorkloads?: boolean;
  /** Include `admissionScopeRules` too (the opt-in scope; the installs give them a role of their own). */
  admissionScope?: boolean;
}): [V1ClusterRole, V1ClusterRoleBinding] {
  const managed = options.managedWorkloads === true;
  const scoped = managed && options.admissionScope === true;
  const metadata = {
    name: options.name,
    ...(options.labels === undefined ? {} : { labels: { ...options.labels } }),
  };
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata,
      rules: [
        ...berthLeaseRules,
        ...(managed ? managedWorkloadRules : []),
        ...(scoped ? admissionScopeRules : []),
      ].map((r) => ({ ...r })),
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { ...metadata },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: options.name },
      subjects: [{ kind: 'ServiceAccount', ...options.serviceAccount }],
    },
  ];
}

/** The admission policy that narrows the operator's namespace `patch` (installs; docs/admission.md). */
export const NAMESPACE_WRITES_POLICY = 'berth-operator-namespace-writes';

/** CEL: whether `field` of metadata is the same on both sides (absent on both counts as the same). */
const unchanged = (field: string): string =>
  `has(object.metadata.${field}) == has(oldObject.metadata.${field}) && (!has(object.metadata.${field}) || object.metadata.${field} == oldObject.metadata.${field})`;

/**
 * A ValidatingAdmissionPolicy and its binding that let `username` (the operator) change a namespace in two
 * ways only: add the scope label with the value `enabled` where it has none (the upgrade's labelling), and
 * remove it where it says `leaving` (the exit controller). RBAC cannot narrow `patch` to one label, and the
 * right to relabel every namespace would otherwise include removing, say, a Pod Security label. Evaluated
 * by kube-apiserver itself: nothing of the operator needs to run for it.
 */
export function namespaceWritesPolicy(
  username: string,
): [V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding] {
  const S = JSON.stringify(SCOPE_LABEL).replaceAll('"', "'");
  const labels = 'object.metadata.labels';
  const oldLabels = 'oldObject.metadata.labels';
  const message = `the operator may only add the label ${SCOPE_LABEL}=${SCOPE_ENABLED} to a namespace without it, or remove it when it says ${SCOPE_LEAVING}`;
  const validations = [
    // An empty subresource is absent from the request.
    `!has(request.subResource) || request.subResource == ''`,
    // Every label it keeps or adds is as it was, but the scope label, which it may only add as enabled.
    `!has(${labels}) || ${labels}.all(k, k == ${S} ? (${labels}[k] == '${SCOPE_ENABLED}' && (!has(${oldLabels}) || !(k in ${oldLabels}) || ${oldLabels}[k] == '${SCOPE_ENABLED}')) : (has(${oldLabels}) && k in ${oldLabels} && ${oldLabels}[k] == ${labels}[k]))`,
    // None is removed, but the scope label when it says leaving.
    `!has(${oldLabels}) || ${oldLabels}.all(k, (has(${labels}) && k in ${labels}) || (k == ${S} && ${oldLabels}[k] == '${SCOPE_LEAVING}'))`,
    unchanged('annotations'),
    unchanged('finalizers'),
    unchanged('ownerReferences'),
    'has(object.spec) == has(oldObject.spec) && (!has(object.spec) || object.spec == oldObject.spec)',
  ].map((expression) => ({ expression, message }));
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: NAMESPACE_WRITES_POLICY },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: [''],
              apiVersions: ['v1'],
              operations: ['UPDATE'],
              resources: ['namespaces', 'namespaces/status', 'namespaces/finalize'],
            },
          ],
        },
        matchConditions: [{ name: 'the-operator', expression: `request.userInfo.username == '${username}'` }],
        validations,
      },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: NAMESPACE_WRITES_POLICY },
      spec: { policyName: NAMESPACE_WRITES_POLICY, validationActions: ['Deny'] },
    },
  ];
}
