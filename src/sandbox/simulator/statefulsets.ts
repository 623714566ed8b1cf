// The StatefulSet controller (pkg/controller/statefulset): Pods `<sts>-<ordinal>` for the ordinals
// [start, start + replicas), with the labels `controller-revision-hash`, `statefulset.kubernetes.io/pod-name`
// and `apps.kubernetes.io/pod-index`, hostname = Pod name and subdomain = serviceName. OrderedReady (the
// default) creates one Pod at a time once its predecessors are Running and Ready and scales down from the
// highest ordinal, waiting for each termination, exactly with kube's blocking rules (an unhealthy condemned
// Pod blocks unless it is the first unhealthy one); Parallel acts on all at once. Terminal (Succeeded or
// Failed) Pods are deleted and recreated. RollingUpdate replaces Pods of an older revision from the highest
// ordinal down to the partition, one at a time; OnDelete leaves them. Status: replicas, readyReplicas,
// availableReplicas, currentReplicas, updatedReplicas, currentRevision, updateRevision, observedGeneration.
// Not simulated: ControllerRevision objects (the revision is a hash of the template, and Pods recreated
// below the partition get the newest template), volumeClaimTemplates/PVCs, maxUnavailable, adoption.
import type { Change } from '../store.ts';
import type { KubeObject } from '../types.ts';
import {
  controllerUser,
  isNotFound,
  isPodAvailable,
  isPodTerminal,
  isRunningAndReady,
  isTerminating,
  keyOf,
  nameOf,
  namespaceOf,
  newControllerRef,
  nextAvailabilityMs,
  num,
  obj,
  omitEmpty,
  podFromTemplate,
  requestContext,
  splitKey,
  str,
  templateHash,
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
import { desiredReplicas, ownedPods } from './replicasets.ts';

const USER = controllerUser('statefulset-controller');
const ctxFor = () => requestContext(USER, 'kube-controller-manager');

export const REVISION_LABEL = 'controller-revision-hash';
export const POD_NAME_LABEL = 'statefulset.kubernetes.io/pod-name';
export const POD_INDEX_LABEL = 'apps.kubernetes.io/pod-index';

export type StatefulSetAction = { kind: 'create'; ordinal: number } | { kind: 'delete'; pod: KubeObject };

/** The ordinal in a Pod's name `<sts>-<n>`, or -1. */
export function ordinalOf(sts: KubeObject, pod: KubeObject): number {
  const prefix = `${nameOf(sts)}-`;
  const name = nameOf(pod);
  if (!name.startsWith(prefix)) return -1;
  const rest = name.slice(prefix.length);
  return /^(0|[1-9]\d*)$/.test(rest) ? Number(rest) : -1;
}

export const updateRevisionOf = (sts: KubeObject): string =>
  `${nameOf(sts)}-${templateHash(obj(sts.spec).template)}`;

const revisionOf = (pod: KubeObject): string | undefined => pod.metadata.labels?.[REVISION_LABEL];

/** updateStatefulSet: the creations and deletions of one sync, in order. */
export function planStatefulSet(sts: KubeObject, pods: KubeObject[], now: number): StatefulSetAction[] {
  const spec = obj(sts.spec);
  const start = num(obj(spec.ordinals).start, 0);
  const count = desiredReplicas(sts);
  const minReady = num(spec.minReadySeconds, 0);
  const monotonic = spec.podManagementPolicy !== 'Parallel';
  const updateRevision = updateRevisionOf(sts);
  const replicas: (KubeObject | undefined)[] = new Array(count).fill(undefined);
  const condemned: KubeObject[] = [];
  for (const pod of pods) {
    const ord = ordinalOf(sts, pod);
    if (ord < 0) continue;
    if (ord >= start && ord < start + count) replicas[ord - start] = pod;
    else condemned.push(pod);
  }
  condemned.sort((a, b) => ordinalOf(sts, b) - ordinalOf(sts, a));
  const healthy = (p: KubeObject | undefined): boolean =>
    p !== undefined && !isTerminating(p) && isRunningAndReady(p) && isPodAvailable(p, minReady, now);
  let firstUnhealthy: KubeObject | undefined | null = null;
  for (const p of replicas) {
    if (!healthy(p)) {
      firstUnhealthy = p;
      break;
    }
  }
  if (firstUnhealthy === null) firstUnhealthy = [...condemned].reverse().find((p) => !healthy(p));
  const actions: StatefulSetAction[] = [];
  if (sts.metadata.deletionTimestamp) return actions;

  for (let i = 0; i < count; i++) {
    const pod = replicas[i];
    if (pod && isPodTerminal(pod)) {
      if (!isTerminating(pod)) actions.push({ kind: 'delete', pod });
      if (monotonic) return actions;
      continue;
    }
    if (!pod) {
      actions.push({ kind: 'create', ordinal: start + i });
      if (monotonic) return actions;
      continue;
    }
    if (monotonic && (isTerminating(pod) || !healthy(pod))) return actions;
  }
  for (const pod of condemned) {
    if (isTerminating(pod)) {
      if (monotonic) return actions;
      continue;
    }
    if (monotonic && !healthy(pod) && pod !== firstUnhealthy) return actions;
    actions.push({ kind: 'delete', pod });
    if (monotonic) return actions;
  }
  const strategy = obj(spec.updateStrategy);
  if (strategy.type === 'OnDelete') return actions;
  const partition = num(obj(strategy.rollingUpdate).partition, 0);
  for (let i = count - 1; i >= partition; i--) {
    const pod = replicas[i];
    if (!pod) continue;
    if (revisionOf(pod) !== updateRevision && !isTerminating(pod)) {
      actions.push({ kind: 'delete', pod });
      return actions;
    }
    if (!healthy(pod)) return actions;
  }
  return actions;
}

/** The status the StatefulSet controller records (with completeRollingUpdate applied). */
export function statefulSetStatus(sts: KubeObject, pods: KubeObject[], now: number): Record<string, unknown> {
  const spec = obj(sts.spec);
  const minReady = num(spec.minReadySeconds, 0);
  const updateRevision = updateRevisionOf(sts);
  let currentRevision = str(obj(sts.status).currentRevision) || updateRevision;
  const created = pods.filter((p) => ordinalOf(sts, p) >= 0);
  const ready = created.filter(isRunningAndReady);
  const available = ready.filter((p) => isPodAvailable(p, minReady, now));
  const live = created.filter((p) => !isTerminating(p));
  let current = live.filter((p) => revisionOf(p) === currentRevision).length;
  const updated = live.filter((p) => revisionOf(p) === updateRevision).length;
  if (
    obj(spec.updateStrategy).type !== 'OnDelete' &&
    updated === created.length &&
    ready.length === created.length
  ) {
    currentRevision = updateRevision;
    current = updated;
  }
  return omitEmpty(
    {
      observedGeneration: sts.metadata.generation,
      replicas: created.length,
      readyReplicas: ready.length,
      currentReplicas: current,
      updatedReplicas: updated,
      currentRevision,
      updateRevision,
      collisionCount: 0,
      availableReplicas: available.length,
    },
    ['observedGeneration', 'readyReplicas', 'currentReplicas', 'updatedReplicas'],
  );
}

export function statefulSetPod(sts: KubeObject, ordinal: number): KubeObject {
  const name = `${nameOf(sts)}-${ordinal}`;
  const serviceName = str(obj(sts.spec).serviceName);
  return podFromTemplate(obj(sts.spec).template, {
    namespace: namespaceOf(sts),
    name,
    ownerRef: newControllerRef(sts, 'apps/v1', 'StatefulSet'),
    extraLabels: {
      [REVISION_LABEL]: updateRevisionOf(sts),
      [POD_NAME_LABEL]: name,
      [POD_INDEX_LABEL]: String(ordinal),
    },
    extraSpec: serviceName ? { hostname: name, subdomain: serviceName } : { hostname: name },
  });
}

export function statefulSetController(ctx: SimContext): SimController {
  const { store, objects, types } = ctx;
  return {
    name: 'statefulset',
    keysFor(change: Change): string[] {
      if (change.typeKey === TYPE_KEYS.statefulsets) return [keyOf(change.object)];
      if (change.typeKey === TYPE_KEYS.pods) return ownerKeys(change, 'StatefulSet');
      return [];
    },
    initialKeys: () => allKeys(store, TYPE_KEYS.statefulsets),
    async reconcile(key) {
      const { namespace, name } = splitKey(key);
      const sts = getObject(store, TYPE_KEYS.statefulsets, namespace, name);
      if (!sts) return undefined;
      let failure: unknown;
      for (const action of planStatefulSet(sts, ownedPods(ctx, sts), ctx.now())) {
        try {
          if (action.kind === 'create') {
            await objects.create(types.pods, namespace, statefulSetPod(sts, action.ordinal), ctxFor());
          } else {
            await objects.delete(
              types.pods,
              namespace,
              nameOf(action.pod),
              { preconditions: { uid: action.pod.metadata.uid } },
              ctxFor(),
            );
          }
        } catch (error) {
          if (action.kind === 'delete' && isNotFound(error)) continue;
          failure = error;
          break;
        }
      }
      const latest = getObject(store, TYPE_KEYS.statefulsets, namespace, name);
      if (!latest || latest.metadata.uid !== sts.metadata.uid) return undefined;
      const now = ctx.now();
      const pods = ownedPods(ctx, latest);
      await writeStatus(ctx, types.statefulsets, latest, statefulSetStatus(latest, pods, now), ctxFor());
      if (failure !== undefined) throw failure;
      return nextAvailabilityMs(pods, num(obj(latest.spec).minReadySeconds, 0), now);
    },
  };
}
