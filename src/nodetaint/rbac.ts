// Least-privilege RBAC of the guard, as data for deploy/ (and the RBAC-enforcing integration tests).
// aether's ClusterRole grants pods get/list/watch cluster-wide; here Pods are readable only in the
// agent namespace, since the Pod watch is scoped to it.
import type {
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1PolicyRule,
  V1Role,
  V1RoleBinding,
} from '@kubernetes/client-node';

/** Namespace of the Events about Nodes (cluster-scoped objects): kube-apiserver convention. */
export const NODE_EVENTS_NAMESPACE = 'default';

export interface NamespacedRules {
  namespace: string;
  rules: V1PolicyRule[];
}

export interface NodeTaintRbac {
  /** Cluster-wide (ClusterRole). */
  clusterRules: V1PolicyRule[];
  /** Per namespace (Role + RoleBinding in that namespace). */
  namespacedRules: NamespacedRules[];
}

export function nodeTaintRbac(agentNamespace: string): NodeTaintRbac {
  return {
    // get (re-read before the write), list/watch (informer), patch (add the taint; never remove it).
    clusterRules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch', 'patch'] }],
    namespacedRules: [
      {
        namespace: agentNamespace,
        rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] }],
      },
      {
        // The TaintRearmed Warning Event about a Node lives in "default" (create, and patch for series).
        namespace: NODE_EVENTS_NAMESPACE,
        rules: [{ apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] }],
      },
    ],
  };
}

export interface RbacSubject {
  kind: 'ServiceAccount' | 'User' | 'Group';
  name: string;
  /** ServiceAccount namespace. */
  namespace?: string;
}

export type RbacObject = V1ClusterRole | V1ClusterRoleBinding | V1Role | V1RoleBinding;

/** ClusterRole(+Binding) and Role(+Binding) objects granting the guard's rules to `subject`. */
export function nodeTaintRbacObjects(options: {
  /** Object name, e.g. `berth-operator-node-taint-guard`. */
  name: string;
  agentNamespace: string;
  subject: RbacSubject;
  labels?: Record<string, string>;
}): RbacObject[] {
  const { name, subject } = options;
  const rbac = nodeTaintRbac(options.agentNamespace);
  const meta = (namespace?: string) => ({
    name,
    ...(namespace === undefined ? {} : { namespace }),
    ...(options.labels === undefined ? {} : { labels: { ...options.labels } }),
  });
  const subjects = [
    { ...subject, ...(subject.kind === 'ServiceAccount' ? {} : { apiGroup: 'rbac.authorization.k8s.io' }) },
  ];
  const objects: RbacObject[] = [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: meta(),
      rules: rbac.clusterRules,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: meta(),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects,
    },
  ];
  // Merge rules per namespace (the agent namespace may be "default" too).
  const byNamespace = new Map<string, V1PolicyRule[]>();
  for (const { namespace, rules } of rbac.namespacedRules)
    byNamespace.set(namespace, [...(byNamespace.get(namespace) ?? []), ...rules]);
  for (const [namespace, rules] of byNamespace) {
    objects.push(
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: meta(namespace), rules },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: meta(namespace),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
        subjects,
      },
    );
  }
  return objects;
}
