// The `managed-pods` controller (docs/behaviour.md §2.7) and its companion `managed-permits`.
//
// managed-pods, one key per Pod carrying the managed-lease-uid label (an informer scoped by the API
// server to that label, across namespaces): the Pod and its lease are read from the API server, then
//   - a Pod whose lease is gone or replaced (another UID) is deleted (UID precondition);
//   - a Pod of a lease that is deleting or Stopping is deleted, and the lease nudged to finish its drain;
//   - a Pod of a lease that is not activeAt(now) stays gated;
//   - a gated or unregistered Pod of an active lease is handed to managed-permits.
// managed-permits, one key per BerthLease: `permitPods` for all the lease's Pods at once (one status
// write registers every new Pod), exclusively with the lease's reconcile (same KeyedLock), so the two
// never race each other's status writes.
//
// Beyond the original, which re-polls every managed Pod every second: nothing here polls. Pods are
// driven by their own events (creation; a changed binding), by the lease's transitions (Stopping,
// deleting, deleted, replaced: its Pods are re-examined), by the lease's heartbeat (every held
// reconcile runs permitPods, which also covers a lease that was briefly past its deadline when a Pod
// arrived) and, while a lease drains, a Pod's removal or termination nudges that lease's reconcile so
// the release follows at once instead of on the next 1 s requeue.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { Clock } from '../kube/clock.ts';
import { Controller, type ReconcileContext, type ReconcileResult } from '../kube/controller.ts';
import { Informer } from '../kube/informer.ts';
import { splitKey } from '../kube/keys.ts';
import type { BackoffPolicy } from '../kube/restart-backoff.ts';
import type { KubeRequester } from '../kube/transport.ts';
import type { Logger } from '../observability/logger.ts';
import { parseStoredWorkload } from '../workloads/model.ts';
import { type BerthLease, LOCAL_TIMEOUT_MS, MANAGED_LEASE, MANAGED_UID, WorkloadPhase } from './api.ts';
import { leasePodGrace } from './drain.ts';
import type { BerthLeaseApi } from './leaseio.ts';
import { activeAt, isDeleting } from './ownership.ts';
import { needsPermit } from './permit.ts';
import { annotationsOf, isDeletingObject, type KubeObj, uidOf, type WorkloadApi } from './workload-io.ts';

export const MANAGED_PODS = 'managed-pods';
export const MANAGED_PERMITS = 'managed-permits';
/** Index of the Pod (and Job) informers: `namespace/<lease name>` from the managed-lease annotation. */
export const LEASE_INDEX = 'berth.skaphos.io/lease';

/** What the managed-pods controller does with one Pod (§2.7), pure. */
export type PodAction =
  | { kind: 'ignore' }
  /** Delete the Pod; `nudge`: the lease is draining and should look again once it is gone. */
  | {
      kind: 'delete';
      reason: 'lease-gone' | 'lease-replaced' | 'lease-deleting' | 'lease-stopping';
      nudge: boolean;
    }
  /** The lease does not permit Pod starts now: leave it gated. */
  | { kind: 'wait' }
  | { kind: 'permit' };

/** Whether the lease is closing its workload: deleting, or phase Stopping. */
export const isClosing = (lease: BerthLease): boolean =>
  isDeleting(lease) || lease.status?.workload?.phase === WorkloadPhase.Stopping;

export function decidePod(
  pod: KubeObj,
  lease: BerthLease | undefined,
  now: number,
  stopLeadMs: number,
): PodAction {
  const leaseUID = annotationsOf(pod)[MANAGED_UID];
  if (leaseUID === undefined) return { kind: 'ignore' };
  if (lease === undefined) return { kind: 'delete', reason: 'lease-gone', nudge: false };
  if ((lease.metadata.uid ?? '') !== leaseUID)
    return { kind: 'delete', reason: 'lease-replaced', nudge: false };
  if (isDeleting(lease)) return { kind: 'delete', reason: 'lease-deleting', nudge: true };
  if (lease.status?.workload?.phase === WorkloadPhase.Stopping)
    return { kind: 'delete', reason: 'lease-stopping', nudge: true };
  if (!activeAt(lease, now, stopLeadMs)) return { kind: 'wait' };
  return needsPermit(lease, pod) ? { kind: 'permit' } : { kind: 'ignore' };
}

interface MetaLike {
  namespace?: string | null;
  annotations?: Record<string, string> | null;
}

/** `namespace/<lease name>` of a managed object, from its annotation. */
export function leaseKeyOf(metadata: MetaLike | undefined): string | undefined {
  const name = metadata?.annotations?.[MANAGED_LEASE];
  return name ? `${metadata?.namespace ?? ''}/${name}` : undefined;
}

/** Pod phase of a cached object. */
const phaseOf = (o: KubernetesObject): unknown => (o as { status?: { phase?: unknown } }).status?.phase;
const terminal = (o: KubernetesObject): boolean => phaseOf(o) === 'Succeeded' || phaseOf(o) === 'Failed';

/** The lenient view of a cached object (undefined when it is not one). */
export function asKubeObj(o: KubernetesObject | undefined): KubeObj | undefined {
  const parsed = parseStoredWorkload(o);
  return parsed.ok ? parsed.value : undefined;
}

/** Keeps only what the managed path reads of a Pod or Job: metadata, gates, node, suspend, phase. */
export function slimObject(o: KubernetesObject): KubernetesObject {
  const raw = o as KubernetesObject & {
    spec?: { schedulingGates?: unknown; nodeName?: unknown; suspend?: unknown };
    status?: { phase?: unknown };
  };
  const { managedFields: _managed, ...metadata } = raw.metadata ?? {};
  const spec: Record<string, unknown> = {};
  if (raw.spec?.schedulingGates !== undefined) spec.schedulingGates = raw.spec.schedulingGates;
  if (raw.spec?.nodeName !== undefined) spec.nodeName = raw.spec.nodeName;
  if (raw.spec?.suspend !== undefined) spec.suspend = raw.spec.suspend;
  const slim: Record<string, unknown> = { apiVersion: raw.apiVersion, kind: raw.kind, metadata, spec };
  if (raw.status?.phase !== undefined) slim.status = { phase: raw.status.phase };
  return slim as KubernetesObject;
}

const bindingFingerprint = (o: KubernetesObject): string => {
  const a = o.metadata?.annotations ?? {};
  return JSON.stringify([o.metadata?.uid, a[MANAGED_UID], a[MANAGED_LEASE]]);
};

/** What the Pod controllers need from the rest of the managed path. */
export interface ManagedPodsHooks {
  /** The cached BerthLease of `namespace/name` (triggers only; decisions read the API server). */
  cachedLease(key: string): BerthLease | undefined;
  /** Reconcile the lease soon (its drain may be complete). */
  nudgeLease(key: string): void;
  /** managed-permits' work for one lease, run exclusively with the lease's reconcile. */
  permit(leaseKey: string, ctx: ReconcileContext): Promise<void>;
}

export interface ManagedPodsOptions {
  transport: KubeRequester;
  api: WorkloadApi;
  leases: BerthLeaseApi;
  hooks: ManagedPodsHooks;
  clock: Clock;
  /** `--stop-lead`: activeAt's lead. */
  stopLeadMs: number;
  informerClock: Clock;
  informerBackoff?: Partial<BackoffPolicy>;
  maxConcurrentReconciles: number;
  registry?: Registry;
  logger?: Logger;
}

export class ManagedPods {
  readonly informer: Informer<KubernetesObject>;
  readonly pods: Controller;
  readonly permits: Controller;
  readonly #o: ManagedPodsOptions;
  /** When the informer first saw each Pod (wall clock, by UID): the creation time to the millisecond. */
  readonly #firstSeen = new Map<string, number>();

  constructor(options: ManagedPodsOptions) {
    this.#o = options;
    this.informer = new Informer<KubernetesObject>({
      name: MANAGED_PODS,
      transport: options.transport,
      resource: { version: 'v1', plural: 'pods' },
      labelSelector: MANAGED_UID,
      transform: slimObject,
      clock: options.informerClock,
      ...(options.informerBackoff ? { backoff: options.informerBackoff } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
    });
    this.informer.addIndexer(LEASE_INDEX, (o) => {
      const key = leaseKeyOf(o.metadata);
      return key === undefined ? [] : [key];
    });
    const common = {
      reconcileTimeoutMs: LOCAL_TIMEOUT_MS,
      maxConcurrentReconciles: options.maxConcurrentReconciles,
      clock: options.clock,
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    };
    this.pods = new Controller({
      name: MANAGED_PODS,
      reconcile: (key, ctx) => this.#reconcilePod(key, ctx),
      ...common,
    })
      // A new Pod, or a Pod whose binding changed; status and gate updates decide nothing new.
      .watches(this.informer, {
        predicate: (pod, old) => old === undefined || bindingFingerprint(old) !== bindingFingerprint(pod),
      });
    this.permits = new Controller({
      name: MANAGED_PERMITS,
      reconcile: async (key, ctx) => {
        await options.hooks.permit(key, ctx);
      },
      ...common,
    });
    this.informer.addEventHandler({
      onAdd: (pod) => {
        const uid = pod.metadata?.uid;
        if (uid && !this.#firstSeen.has(uid)) this.#firstSeen.set(uid, options.clock.now());
        this.#permitEarly(pod);
      },
      onUpdate: (old, pod) => {
        if (terminal(pod) && !terminal(old)) this.#nudgeIfClosing(pod);
      },
      onDelete: (pod) => {
        const uid = pod.metadata?.uid;
        if (uid) this.#firstSeen.delete(uid);
        this.#nudgeIfClosing(pod);
      },
    });
  }

  /** Re-examines the Pods of a lease (after it started closing, was deleted or replaced). */
  enqueueForLease(leaseKey: string): void {
    for (const key of this.informer.indexKeys(LEASE_INDEX, leaseKey)) this.pods.enqueue(key);
  }

  /** Asks managed-permits to permit the Pods of a lease. */
  requestPermit(leaseKey: string): void {
    this.permits.enqueue(leaseKey);
  }

  /**
   * The creation time of a Pod to the millisecond where possible: `creationTimestamp` has whole
   * seconds, so the informer's first sighting refines it when it falls within that second.
   */
  createdAt(pod: KubeObj): number | undefined {
    const created = pod.metadata.creationTimestamp ? Date.parse(pod.metadata.creationTimestamp) : Number.NaN;
    const seen = this.#firstSeen.get(uidOf(pod));
    if (!Number.isFinite(created)) return seen;
    return seen !== undefined && seen >= created && seen < created + 1000 ? seen : created;
  }

  /**
   * A new gated Pod of a lease the cache shows active goes straight to managed-permits (which reads
   * everything again from the API server); managed-pods still examines it as usual.
   */
  #permitEarly(o: KubernetesObject): void {
    const key = leaseKeyOf(o.metadata);
    const pod = asKubeObj(o);
    if (key === undefined || pod === undefined) return;
    const lease = this.#o.hooks.cachedLease(key);
    if (lease === undefined || lease.metadata.uid !== annotationsOf(pod)[MANAGED_UID]) return;
    if (activeAt(lease, this.#o.clock.now(), this.#o.stopLeadMs) && needsPermit(lease, pod))
      this.requestPermit(key);
  }

  #nudgeIfClosing(o: KubernetesObject): void {
    const key = leaseKeyOf(o.metadata);
    if (key === undefined) return;
    const lease = this.#o.hooks.cachedLease(key);
    if (lease !== undefined && isClosing(lease)) this.#o.hooks.nudgeLease(key);
  }

  async #reconcilePod(key: string, ctx: ReconcileContext): Promise<ReconcileResult> {
    const { namespace = '', name } = splitKey(key);
    const { api, leases, clock, hooks } = this.#o;
    const pod = await api.get('Pod', namespace, name, ctx.signal);
    if (pod === undefined) return {};
    const leaseName = annotationsOf(pod)[MANAGED_LEASE] ?? '';
    const lease = leaseName === '' ? undefined : await leases.get(namespace, leaseName, ctx.signal);
    const action = decidePod(pod, lease, clock.now(), this.#o.stopLeadMs);
    const leaseKey = `${namespace}/${leaseName}`;
    switch (action.kind) {
      case 'delete':
        if (!isDeletingObject(pod)) {
          // A Pod of a closing lease stops within the bound of its drain (drain.ts) whoever deletes it.
          const closing = lease !== undefined && lease.metadata.uid === annotationsOf(pod)[MANAGED_UID];
          const grace = closing ? leasePodGrace(lease, pod, clock.now()) : undefined;
          const outcome = await api.delete('Pod', namespace, name, uidOf(pod), ctx.signal, grace);
          ctx.log.info(
            { lease: leaseName, reason: action.reason, outcome },
            'deleted a managed Pod its lease no longer covers',
          );
        }
        if (action.nudge) hooks.nudgeLease(leaseKey);
        return {};
      case 'permit':
        this.requestPermit(leaseKey);
        return {};
      case 'wait':
      case 'ignore':
        return {};
    }
  }
}
