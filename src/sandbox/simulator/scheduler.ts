// The scheduler (kube-scheduler as system:kube-scheduler): binds Pods that have no nodeName, no scheduling
// gates, no deletionTimestamp, are Pending and name the default scheduler, through the `pods/binding`
// subresource (so validating webhooks on pods/binding see every binding), to the feasible Nodes in
// round-robin order. Feasible: not unschedulable, every NoSchedule/NoExecute taint tolerated, nodeSelector
// matched. A Pod that fits no Node gets PodScheduled=False/Unschedulable with a kube-like message and is
// retried when Nodes change; a failed binding is retried with backoff.
// Not simulated: resources and capacity, affinity/anti-affinity, topology spread, preemption, priority
// order, nominatedNodeName, the not-ready/unreachable taints of the node lifecycle controller.
import { rfc3339 } from '../objects.ts';
import type { Change } from '../store.ts';
import type { KubeObject } from '../types.ts';
import {
  arr,
  type Condition,
  conditionsOf,
  isConflict,
  isNotFound,
  keyOf,
  nameOf,
  nodeNameOf,
  obj,
  podPhase,
  podSpec,
  requestContext,
  SCHEDULER_USER,
  schedulingGatesOf,
  setCondition,
  splitKey,
  str,
  strMap,
} from './common.ts';
import { getObject, type SimContext, type SimController, TYPE_KEYS, writeStatus } from './context.ts';

const ctxFor = () => requestContext(SCHEDULER_USER, 'kube-scheduler');

/** The Pod waits for this scheduler: Pending, unbound, ungated, not being deleted. */
export function needsScheduling(pod: KubeObject): boolean {
  const scheduler = str(podSpec(pod).schedulerName) ?? 'default-scheduler';
  return (
    scheduler === 'default-scheduler' &&
    !nodeNameOf(pod) &&
    schedulingGatesOf(pod).length === 0 &&
    !pod.metadata.deletionTimestamp &&
    podPhase(pod) === 'Pending'
  );
}

interface Taint {
  key: string;
  value?: string;
  effect: string;
}

/** v1helper.TolerationsTolerateTaint. */
export function tolerates(pod: KubeObject, taint: Taint): boolean {
  return arr(podSpec(pod).tolerations).some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (t.operator === 'Exists') return !t.key || t.key === taint.key;
    return t.key === taint.key && (str(t.value) ?? '') === (taint.value ?? '');
  });
}

/** Why a Node cannot take the Pod (scheduler plugin messages), or undefined when it fits. */
export function unfitReason(pod: KubeObject, node: KubeObject): string | undefined {
  const spec = obj(node.spec);
  if (
    spec.unschedulable === true &&
    !tolerates(pod, { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' })
  )
    return 'node(s) were unschedulable';
  for (const t of arr(spec.taints) as unknown as Taint[]) {
    if (t.effect !== 'NoSchedule' && t.effect !== 'NoExecute') continue;
    if (!tolerates(pod, t)) return `node(s) had untolerated taint {${t.key}: ${t.value ?? ''}}`;
  }
  const labels = node.metadata.labels ?? {};
  for (const [k, v] of Object.entries(strMap(podSpec(pod).nodeSelector)))
    if (labels[k] !== v) return "node(s) didn't match Pod's node affinity/selector";
  return undefined;
}

/** The FitError message kube-scheduler records on an unschedulable Pod. */
export function unschedulableMessage(reasons: string[], nodeCount: number): string {
  if (nodeCount === 0) return 'no nodes available to schedule pods';
  const counts = new Map<string, number>();
  for (const r of reasons) counts.set(r, (counts.get(r) ?? 0) + 1);
  const parts = [...counts.entries()].map(([r, n]) => `${n} ${r}`).sort();
  return `0/${nodeCount} nodes are available: ${parts.join(', ')}.`;
}

export function schedulerController(ctx: SimContext): SimController {
  const { store, objects, types } = ctx;
  let cursor = 0;

  const pendingKeys = (): string[] => store.list(TYPE_KEYS.pods).filter(needsScheduling).map(keyOf);

  return {
    name: 'scheduler',
    keysFor(change: Change): string[] {
      if (change.typeKey === TYPE_KEYS.pods)
        return change.type !== 'DELETED' && needsScheduling(change.object) ? [keyOf(change.object)] : [];
      if (change.typeKey === TYPE_KEYS.nodes) return pendingKeys();
      return [];
    },
    initialKeys: pendingKeys,
    async reconcile(key) {
      const { namespace, name } = splitKey(key);
      const pod = getObject(store, TYPE_KEYS.pods, namespace, name);
      if (!pod || !needsScheduling(pod)) return undefined;
      const nodes = store.list(TYPE_KEYS.nodes).filter((n) => !n.metadata.deletionTimestamp);
      const reasons: string[] = [];
      const feasible = nodes.filter((n) => {
        const reason = unfitReason(pod, n);
        if (reason) reasons.push(reason);
        return reason === undefined;
      });
      if (feasible.length === 0) {
        const conditions: Condition[] = setCondition(
          conditionsOf(pod.status),
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: unschedulableMessage(reasons, nodes.length),
          },
          rfc3339(ctx.now()),
        );
        await writeStatus(ctx, types.pods, pod, { ...obj(pod.status), conditions }, ctxFor());
        return undefined; // retried when Nodes change
      }
      const node = feasible[cursor++ % feasible.length]!;
      try {
        await objects.bind(
          namespace,
          name,
          {
            apiVersion: 'v1',
            kind: 'Binding',
            metadata: { name, namespace, uid: pod.metadata.uid },
            target: { apiVersion: 'v1', kind: 'Node', name: nameOf(node) },
          },
          ctxFor(),
        );
      } catch (error) {
        // Bound or deleted meanwhile: nothing left to do (the reconcile re-reads it if it changed).
        if (isNotFound(error)) return undefined;
        if (isConflict(error) && nodeNameOf(getObject(store, TYPE_KEYS.pods, namespace, name) ?? pod))
          return undefined;
        throw error;
      }
      return undefined;
    },
  };
}
