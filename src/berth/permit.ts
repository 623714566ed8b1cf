// Pod permitting (docs/behaviour.md §2.7 `permitPods` / `permitPod`): while the lease is
// `activeAt(now)`, each managed Pod — listed by the label `berth.skaphos.io/managed-lease-uid=<lease
// UID>` — whose annotations name this lease and whose live ancestry ends at the admitted target is
// registered as `(name, uid)` in `status.workload.pods` with a resourceVersion-guarded status write, and
// only once that write landed is its scheduling gate removed with a resourceVersion-guarded Pod write.
// A failed registration never ungates: the status CAS also serializes registration with Stopping, so a
// stale Active copy loses with 409 once Stopping is committed.
//
// Beyond the original:
// - One pass registers every new Pod in a single status write (the original writes once per Pod);
// - Pods already registered and ungated are not re-checked (nothing to decide for them), so a steady
//   heartbeat costs one Pod LIST and no owner reads;
// - one bad Pod does not hold the others back: every Pod that passes its checks is permitted, then the
//   first error (exact message) is returned so the work is retried.

import { isConflict, isNotFound } from '../kube/client.ts';
import { type AncestryRoot, memoizedOwners, resolveRoot } from './ancestry.ts';
import {
  type BerthLease,
  MANAGED_LEASE,
  MANAGED_UID,
  MAX_PERMITTED_PODS,
  type PermittedPod,
  ReconcileError,
  SCHEDULING_GATE,
} from './api.ts';
import { activeAt } from './ownership.ts';
import { targetKind } from './targets.ts';
import {
  annotationsOf,
  apiMessage,
  gatesOf,
  isDeletingObject,
  type KubeObj,
  uidOf,
  type WorkloadApi,
} from './workload-io.ts';
import type { LeaseRun } from './workload-manager.ts';

/** What permitting needs of a reconcile (a LeaseRun, or the permit controller's own session). */
export type LeaseSession = Pick<
  LeaseRun,
  'lease' | 'signal' | 'log' | 'now' | 'stopLeadMs' | 'stamp' | 'writeStatus'
>;

/** The label selector of a lease's managed objects. */
export const managedSelector = (lease: BerthLease): string => `${MANAGED_UID}=${lease.metadata.uid ?? ''}`;

export const isGated = (pod: KubeObj): boolean => gatesOf(pod).includes(SCHEDULING_GATE);

const isRegistered = (pods: readonly PermittedPod[], pod: KubeObj): boolean =>
  pods.some((p) => p.uid === uidOf(pod) && p.name === pod.metadata.name);

/** Whether a Pod needs anything from permitting: not deleting, and gated or not yet registered. */
export function needsPermit(lease: BerthLease, pod: KubeObj): boolean {
  if (isDeletingObject(pod) || uidOf(pod) === '') return false;
  return isGated(pod) || !isRegistered(lease.status?.workload?.pods ?? [], pod);
}

/** §2.7 step 2: the Pod's annotations name this lease. */
export const bindingMatches = (lease: BerthLease, pod: KubeObj): boolean => {
  const a = annotationsOf(pod);
  return a[MANAGED_UID] === (lease.metadata.uid ?? '') && a[MANAGED_LEASE] === lease.metadata.name;
};

/** §2.7 step 3: the root of the Pod's live ancestry is the lease's target, with the admitted UID. */
export function rootMatches(lease: BerthLease, root: AncestryRoot): boolean {
  const target = lease.spec.target;
  const targetUID = lease.status?.workload?.targetUID ?? '';
  return (
    target !== undefined &&
    targetUID !== '' &&
    root.name === target.name &&
    root.kind === target.kind &&
    root.apiVersion === target.apiVersion &&
    root.uid === targetUID
  );
}

/** One Pod with the outcome of its ancestry check (`error`: resolution failed, with its message). */
export interface PodCheck {
  pod: KubeObj;
  root?: AncestryRoot;
  ancestryError?: string;
}

export interface PermitPlan {
  /** New registrations, within the 1024 limit. */
  register: PermittedPod[];
  /** Pods whose gate is removed once the registrations landed (registered before or now). */
  ungate: KubeObj[];
  /** Exact error messages of the Pods that cannot be permitted. */
  errors: string[];
}

/**
 * §2.7 steps 1-5 for a set of checked Pods, pure. Nothing is planned unless the lease is activeAt(now)
 * with the stop lead.
 */
export function planPermits(
  lease: BerthLease,
  checks: readonly PodCheck[],
  now: number,
  stopLeadMs: number,
): PermitPlan {
  const plan: PermitPlan = { register: [], ungate: [], errors: [] };
  if (!activeAt(lease, now, stopLeadMs)) return plan;
  const registered = [...(lease.status?.workload?.pods ?? [])];
  for (const { pod, root, ancestryError } of checks) {
    if (isDeletingObject(pod) || uidOf(pod) === '') continue;
    if (!bindingMatches(lease, pod)) {
      plan.errors.push(ReconcileError.podBindingMismatch);
      continue;
    }
    if (ancestryError !== undefined) {
      plan.errors.push(ancestryError);
      continue;
    }
    if (root === undefined || !rootMatches(lease, root)) {
      plan.errors.push(ReconcileError.podAncestryDiffers);
      continue;
    }
    if (!isRegistered(registered, pod)) {
      if (!isGated(pod)) {
        plan.errors.push(ReconcileError.unregisteredPodNoGate);
        continue;
      }
      if (registered.length >= MAX_PERMITTED_PODS) {
        plan.errors.push(ReconcileError.maxPods);
        continue;
      }
      const entry = { name: pod.metadata.name, uid: uidOf(pod) };
      registered.push(entry);
      plan.register.push(entry);
    }
    if (isGated(pod)) plan.ungate.push(pod);
  }
  return plan;
}

/** The Pod write that removes only the Berth gate, guarded by the read resourceVersion and UID. */
export function ungatePatch(pod: KubeObj): Record<string, unknown> {
  const rest = (pod.spec?.schedulingGates ?? []).filter((g) => g.name !== SCHEDULING_GATE);
  return {
    metadata: { resourceVersion: pod.metadata.resourceVersion ?? '', uid: uidOf(pod) },
    spec: { schedulingGates: rest.length > 0 ? rest : null },
  };
}

/** The permit errors of one pass; `message` is the first one's exact text. */
export class PermitError extends Error {
  readonly messages: string[];
  constructor(messages: string[], cause?: unknown) {
    super(messages[0] ?? 'permit failed', cause === undefined ? undefined : { cause });
    this.name = 'PermitError';
    this.messages = messages;
  }
}

export interface PermitOutcome {
  registered: PermittedPod[];
  /** The Pods whose gate this pass removed (as read before the write). */
  ungated: KubeObj[];
}

/** Attempts of one gate removal when the Pod changed between the LIST and the write. */
const UNGATE_ATTEMPTS = 2;

async function ungate(
  api: WorkloadApi,
  namespace: string,
  pod: KubeObj,
  signal: AbortSignal,
): Promise<boolean> {
  let current: KubeObj | undefined = pod;
  for (let attempt = 1; ; attempt++) {
    try {
      await api.mergePatch('Pod', namespace, current.metadata.name, ungatePatch(current), signal);
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      if (!isConflict(err) || attempt >= UNGATE_ATTEMPTS) throw err;
    }
    current = await api.get('Pod', namespace, pod.metadata.name, signal);
    // Gone, replaced by a Pod with another UID, deleting, or ungated meanwhile: nothing to do.
    if (
      current === undefined ||
      uidOf(current) !== uidOf(pod) ||
      isDeletingObject(current) ||
      !isGated(current)
    )
      return false;
  }
}

/**
 * `permitPods` (§2.7): registers and ungates the lease's Pods. `listed` are the Pods of one LIST by the
 * managed label when the caller has them. Throws PermitError after doing what could be done.
 */
export async function permitPods(
  session: LeaseSession,
  api: WorkloadApi,
  listed?: readonly KubeObj[],
): Promise<PermitOutcome> {
  const outcome: PermitOutcome = { registered: [], ungated: [] };
  const lease = session.lease;
  if (!activeAt(lease, session.now(), session.stopLeadMs) || lease.spec.target === undefined) return outcome;
  const namespace = lease.metadata.namespace ?? '';
  const pods = listed ?? (await api.list('Pod', namespace, managedSelector(lease), session.signal));
  const candidates = pods.filter((p) => needsPermit(lease, p));
  if (candidates.length === 0) return outcome;

  const owners = memoizedOwners(api, namespace, session.signal);
  const checks: PodCheck[] = await Promise.all(
    candidates.map(async (pod): Promise<PodCheck> => {
      if (!bindingMatches(lease, pod)) return { pod };
      try {
        return { pod, root: await resolveRoot(pod, 'Pod', owners) };
      } catch (err) {
        if (session.signal.aborted) throw err;
        return { pod, ancestryError: err instanceof Error ? err.message : String(err) };
      }
    }),
  );
  // The target kind must be known before anything is registered for it.
  targetKind(lease.spec.target);
  const plan = planPermits(lease, checks, session.now(), session.stopLeadMs);
  const errors = [...plan.errors];

  if (plan.register.length > 0) {
    const w = lease.status?.workload;
    if (w === undefined) throw new PermitError([`${ReconcileError.registerPodPrefix}no workload record`]);
    const { generation } = session.stamp();
    const status = {
      ...(lease.status ?? {}),
      ...(generation === undefined ? {} : { observedGeneration: generation }),
      workload: { ...w, pods: [...(w.pods ?? []), ...plan.register] },
    };
    try {
      await session.writeStatus(status);
    } catch (err) {
      if (session.signal.aborted) throw err;
      // Not registered: nothing is ungated.
      throw new PermitError([ReconcileError.registerPodPrefix + apiMessage(err), ...errors], err);
    }
    outcome.registered = plan.register;
  }

  for (const pod of plan.ungate) {
    try {
      if (await ungate(api, namespace, pod, session.signal)) outcome.ungated.push(pod);
    } catch (err) {
      if (session.signal.aborted) throw err;
      errors.push(ReconcileError.removeGatePrefix + apiMessage(err));
    }
  }
  if (errors.length > 0) throw new PermitError(errors);
  return outcome;
}
