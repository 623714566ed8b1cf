// What every simulated controller gets: reads from the Store (an always-fresh informer cache), writes
// through ObjectService (so admission, validation and conflicts apply exactly as to any client), clocks
// and the resolved options.
import type { ObjectService, RequestContext } from '../objects.ts';
import type { Registry, ResourceType } from '../registry.ts';
import { type Change, objectKey, type Store } from '../store.ts';
import type { KubeObject } from '../types.ts';
import { nameOf, namespaceOf, sameStatus } from './common.ts';

export interface ResolvedSimulatorOptions {
  kubeletReadyDelayMs: number;
  terminationGraceMs: number;
  jobRunMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  nodeName: string;
}

export interface SimTypes {
  pods: ResourceType;
  nodes: ResourceType;
  deployments: ResourceType;
  replicasets: ResourceType;
  statefulsets: ResourceType;
  jobs: ResourceType;
  cronjobs: ResourceType;
}

export const TYPE_KEYS = {
  pods: '/pods',
  nodes: '/nodes',
  deployments: 'apps/deployments',
  replicasets: 'apps/replicasets',
  statefulsets: 'apps/statefulsets',
  jobs: 'batch/jobs',
  cronjobs: 'batch/cronjobs',
} as const;

export interface SimContext {
  store: Store;
  objects: ObjectService;
  types: SimTypes;
  /** Wall clock of the sandbox (timestamps, cron schedules, minReadySeconds). */
  now(): number;
  /** Monotonic milliseconds for the simulator's own delays (kubelet start, grace, run time). */
  elapsed(): number;
  options: ResolvedSimulatorOptions;
}

/** One simulated controller: which keys a Store change concerns, and the reconcile of one key. */
export interface SimController {
  name: string;
  /** Keys (`namespace/name`, or `name` for cluster objects) to reconcile after a change. Never throws. */
  keysFor(change: Change): string[];
  /** Keys of the objects that exist when the simulator starts. */
  initialKeys(): string[];
  /** Reconciles one key; returns a delay in ms to be called again, throws to retry with backoff. */
  reconcile(key: string): Promise<number | undefined>;
}

export function resolveTypes(registry: Registry): SimTypes {
  const need = (group: string, version: string, resource: string): ResourceType => {
    const type = registry.get(group, version, resource);
    if (!type) throw new Error(`workload simulator: ${group}/${version} ${resource} is not served`);
    return type;
  };
  return {
    pods: need('', 'v1', 'pods'),
    nodes: need('', 'v1', 'nodes'),
    deployments: need('apps', 'v1', 'deployments'),
    replicasets: need('apps', 'v1', 'replicasets'),
    statefulsets: need('apps', 'v1', 'statefulsets'),
    jobs: need('batch', 'v1', 'jobs'),
    cronjobs: need('batch', 'v1', 'cronjobs'),
  };
}

export function getObject(
  store: Store,
  typeKey: string,
  namespace: string,
  name: string,
): KubeObject | undefined {
  return store.get(typeKey, namespace || undefined, name);
}

/** Keys of every stored object of a type. */
export function allKeys(store: Store, typeKey: string): string[] {
  return store.list(typeKey).map((o) => objectKey(o.metadata.namespace, nameOf(o)));
}

/** Key of the owner of `object` when its controller reference is of `kind`. */
export function ownerKey(object: KubeObject, kind: string): string | undefined {
  const ref = (object.metadata.ownerReferences ?? []).find((r) => r.controller === true);
  return ref && ref.kind === kind ? `${namespaceOf(object)}/${ref.name}` : undefined;
}

/** Keys of the owners (of `kind`) of the object before and after a change. */
export function ownerKeys(change: Change, kind: string): string[] {
  const keys = new Set<string>();
  for (const o of [change.object, change.previous]) {
    if (!o) continue;
    const key = ownerKey(o, kind);
    if (key) keys.add(key);
  }
  return [...keys];
}

/**
 * Writes `status` through the status subresource with the object's resourceVersion (a stale read loses
 * with 409 and is retried by the queue); nothing is written when the status is unchanged.
 */
export async function writeStatus(
  ctx: SimContext,
  type: ResourceType,
  current: KubeObject,
  status: Record<string, unknown>,
  request: RequestContext,
): Promise<KubeObject> {
  if (sameStatus(current.status, status)) return current;
  return ctx.objects.update(
    type,
    namespaceOf(current),
    nameOf(current),
    { ...current, status },
    'status',
    request,
  );
}
