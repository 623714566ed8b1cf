import type { KubernetesObject } from '@kubernetes/client-node';

export interface Obj extends KubernetesObject {
  spec?: { node?: string };
}

/** A namespaced object with a name and resourceVersion, as the informer tests cache them. */
export const obj = (name: string, rv: string, extra: Partial<Obj> = {}, namespace = 'ns'): Obj => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace, resourceVersion: rv },
  ...extra,
});
