// Where each workload kind is served, for the two I/O edges that read them (the reconciler's
// src/berth/workload-io.ts and admission's webhooks/kube-io.ts).
import { resourcePath } from '../kube/client.ts';
import { KINDS, type WorkloadKind } from './model.ts';

/** The API path of a kind's collection in a namespace, or of one object when `name` is given. */
export function workloadPath(kind: WorkloadKind, namespace: string, name?: string): string {
  const info = KINDS[kind];
  return resourcePath({ group: info.group, version: info.version, plural: info.plural, namespace }, name);
}
