// Least-privilege RBAC of the lease-only BerthLease controller, as data for deploy/ and the
// RBAC-enforcing integration tests. It reads and watches BerthLeases, patches their finalizers
// (resourceVersion-guarded merge patch), replaces their status, and records Events about them. The Go
// chart also grants `update` on berthleases and `get`/`patch` on the status; nothing here uses them.
// The managed-workload path adds its own rules (targets, Pods, Jobs).
import type { V1ClusterRole, V1ClusterRoleBinding, V1PolicyRule } from '@kubernetes/client-node';
import { GROUP, PLURAL } from './api.ts';

export const berthLeaseRules: readonly V1PolicyRule[] = [
  { apiGroups: [GROUP], resources: [PLURAL], verbs: ['get', 'list', 'watch', 'patch'] },
  { apiGroups: [GROUP], resources: [`${PLURAL}/status`], verbs: ['update'] },
  // Kept for clusters enforcing OwnerReferencesPermissionEnforcement-style checks on finalizers.
  { apiGroups: [GROUP], resources: [`${PLURAL}/finalizers`], verbs: ['update'] },
  { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
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
}): [V1ClusterRole, V1ClusterRoleBinding] {
  const metadata = {
    name: options.name,
    ...(options.labels === undefined ? {} : { labels: { ...options.labels } }),
  };
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata,
      rules: berthLeaseRules.map((r) => ({ ...r })),
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
