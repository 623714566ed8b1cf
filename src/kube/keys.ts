// Object keys as client-go's cache builds them: what informers, workqueues and reconcilers share.
import type { KubernetesObject } from '@kubernetes/client-node';

/** client-go's MetaNamespaceKeyFunc: `namespace/name`, or `name` for cluster-scoped objects. */
export function objectKey(obj: KubernetesObject): string {
  const name = obj.metadata?.name ?? '';
  const ns = obj.metadata?.namespace;
  return ns ? `${ns}/${name}` : name;
}

/** Inverse of objectKey. */
export function splitKey(key: string): { namespace: string | undefined; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { namespace: undefined, name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}
