// The ReplicaSet controller (pkg/controller/replicaset): keeps spec.replicas active Pods built from the
// template (generateName `<rs>-`, controller ownerReference), deletes the surplus in kube's order, and
// reports replicas / fullyLabeledReplicas / readyReplicas / availableReplicas / observedGeneration. A
// failed creation or deletion (e.g. an admission webhook's denial) is retried with backoff and shown as
// the ReplicaFailure condition (reason FailedCreate / FailedDelete) until a sync succeeds.
// Not simulated: adoption and release of Pods by label selector (only Pods with this ReplicaSet as
// controller count), burst limits, the terminatingReplicas field.
import { rfc3339 } from '../objects.ts';
import type { Change } from '../store.ts';
import type { KubeObject } from '../types.ts';
import {
  type Condition,
  conditionsOf,
  controllerUser,
  deletionOrder,
  errorMessage,
  isControlledBy,
  isNotFound,
  isPodActive,
  isPodAvailable,
  isPodReady,
  keyOf,
  nameOf,
  namespaceOf,
  newControllerRef,
  nextAvailabilityMs,
  num,
  obj,
  omitEmpty,
  podFromTemplate,
  podNamePrefix,
  removeCondition,
  requestContext,
  setCondition,
  splitKey,
  strMap,
} from './common.ts';
import {
  allKeys,
  getObject,
  ownerKeys,
  type SimContext,
  type SimController,
  TYPE_KEYS,
  writeStatus,
} from './context.ts';

const USER = controllerUser('replicaset-controller');
const ctxFor = () => requestContext(USER, 'kube-controller-manager');

export interface ReplicaSetPlan {
  create: number;
  delete: KubeObject[];
}

/** Desired replicas of a ReplicaSet (or any workload): spec.replicas, 1 when unset. */
export const desiredReplicas = (o: KubeObject): number => num(obj(o.spec).replicas, 1);

/** manageReplicas: how many Pods to create, and which to delete. */
export function planReplicaSet(rs: KubeObject, pods: KubeObject[]): ReplicaSetPlan {
  const active = pods.filter(isPodActive);
  const diff = active.length - desiredReplicas(rs);
  if (diff < 0) return { create: -diff, delete: [] };
  if (diff > 0) return { create: 0, delete: [...active].sort(deletionOrder).slice(0, diff) };
  return { create: 0, delete: [] };
}

export type ManageFailure = { reason: 'FailedCreate' | 'FailedDelete'; message: string } | undefined;

/** calculateStatus of the ReplicaSet controller. */
export function replicaSetStatus(
  rs: KubeObject,
  pods: KubeObject[],
  now: number,
  failure: ManageFailure,
  nowIso: string,
): Record<string, unknown> {
  const spec = obj(rs.spec);
  const minReady = num(spec.minReadySeconds, 0);
  const templateLabels = strMap(obj(obj(spec.template).metadata).labels);
  const active = pods.filter(isPodActive);
  const fullyLabeled = active.filter((p) => {
    const labels = p.metadata.labels ?? {};
    return Object.entries(templateLabels).every(([k, v]) => labels[k] === v);
  });
  let conditions: Condition[] = conditionsOf(rs.status);
  if (failure) {
    conditions = setCondition(
      conditions,
      { type: 'ReplicaFailure', status: 'True', reason: failure.reason, message: failure.message },
      nowIso,
    );
  } else {
    conditions = removeCondition(conditions, 'ReplicaFailure');
  }
  return omitEmpty(
    {
      replicas: active.length,
      fullyLabeledReplicas: fullyLabeled.length,
      readyReplicas: active.filter(isPodReady).length,
      availableReplicas: active.filter((p) => isPodAvailable(p, minReady, now)).length,
      observedGeneration: rs.metadata.generation,
      conditions,
    },
    ['fullyLabeledReplicas', 'readyReplicas', 'availableReplicas', 'observedGeneration', 'conditions'],
  );
}

export function ownedPods(ctx: SimContext, owner: KubeObject): KubeObject[] {
  return ctx.store.list(TYPE_KEYS.pods, namespaceOf(owner)).filter((p) => isControlledBy(p, owner));
}

export function replicaSetController(ctx: SimContext): SimController {
  const { store, objects, types } = ctx;

  async function manage(
    rs: KubeObject,
    pods: KubeObject[],
  ): Promise<{ failure: ManageFailure; error?: unknown }> {
    const plan = planReplicaSet(rs, pods);
    const namespace = namespaceOf(rs);
    for (let i = 0; i < plan.create; i++) {
      const pod = podFromTemplate(obj(rs.spec).template, {
        namespace,
        generateName: podNamePrefix(nameOf(rs)),
        ownerRef: newControllerRef(rs, 'apps/v1', 'ReplicaSet'),
      });
      try {
        await objects.create(types.pods, namespace, pod, ctxFor());
      } catch (error) {
        return { failure: { reason: 'FailedCreate', message: errorMessage(error) }, error };
      }
    }
    for (const pod of plan.delete) {
      try {
        await objects.delete(
          types.pods,
          namespace,
          nameOf(pod),
          { preconditions: { uid: pod.metadata.uid } },
          ctxFor(),
        );
      } catch (error) {
        if (isNotFound(error)) continue;
        return { failure: { reason: 'FailedDelete', message: errorMessage(error) }, error };
      }
    }
    return { failure: undefined };
  }

  return {
    name: 'replicaset',
    keysFor(change: Change): string[] {
      if (change.typeKey === TYPE_KEYS.replicasets) return [keyOf(change.object)];
      if (change.typeKey === TYPE_KEYS.pods) return ownerKeys(change, 'ReplicaSet');
      return [];
    },
    initialKeys: () => allKeys(store, TYPE_KEYS.replicasets),
    async reconcile(key) {
      const { namespace, name } = splitKey(key);
      const rs = getObject(store, TYPE_KEYS.replicasets, namespace, name);
      if (!rs) return undefined;
      let outcome: { failure: ManageFailure; error?: unknown } = { failure: undefined };
      if (!rs.metadata.deletionTimestamp) outcome = await manage(rs, ownedPods(ctx, rs));
      const latest = getObject(store, TYPE_KEYS.replicasets, namespace, name);
      if (!latest || latest.metadata.uid !== rs.metadata.uid) return undefined;
      const pods = ownedPods(ctx, latest);
      const now = ctx.now();
      const nowIso = rfc3339(now);
      await writeStatus(
        ctx,
        types.replicasets,
        latest,
        replicaSetStatus(latest, pods, now, outcome.failure, nowIso),
        ctxFor(),
      );
      if (outcome.error !== undefined) throw outcome.error;
      return nextAvailabilityMs(pods.filter(isPodActive), num(obj(latest.spec).minReadySeconds, 0), now);
    },
  };
}
