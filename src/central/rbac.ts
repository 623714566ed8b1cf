// The rights of the Kubernetes lease store (`--store-backend k8s`, k8sstore.ts) in its coordination
// namespace: it reads one Lease (get), lists them (list: the TTL collector, readiness, migration of legacy
// objects), creates and updates them (compare-and-swap on resourceVersion). It never deletes one (a record
// is never removed, so a token never repeats), watches or patches. The berth-apiserver chart's Role and the
// kustomize install's carry exactly these (test/integration/deploy/helm-apiserver.test.ts); the install
// test runs the store under them (helm-apiserver-install.test.ts).
import type { V1PolicyRule } from '@kubernetes/client-node';

export const K8S_STORE_RULES: readonly V1PolicyRule[] = [
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'create', 'update'] },
];
