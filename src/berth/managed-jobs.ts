// The `managed-jobs` controller (docs/behaviour.md §2.7): one key per Job carrying the
// managed-lease-uid label (an informer scoped to that label across namespaces). A Job whose lease is gone,
// replaced (another UID), deleting or Stopping is suspended (resourceVersion-guarded) and deleted (UID
// precondition); a closing lease is nudged so its drain completes. Jobs of a running or waiting lease are
// left alone. Driven by the Job's creation, the lease's transitions and, while a lease drains, the Job's
// removal — no per-Job polling (the original re-polls every second).
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { Clock } from '../kube/clock.ts';
import { Controller, type ReconcileContext, type ReconcileResult } from '../kube/controller.ts';
import { Informer } from '../kube/informer.ts';
import { splitKey } from '../kube/keys.ts';
import type { BackoffPolicy } from '../kube/restart-backoff.ts';
import type { KubeRequester } from '../kube/transport.ts';
import type { Logger } from '../observability/logger.ts';
import { type BerthLease, LOCAL_TIMEOUT_MS, MANAGED_LEASE, MANAGED_UID, WorkloadPhase } from './api.ts';
import { suspendJob } from './drain.ts';
import type { BerthLeaseApi } from './leaseio.ts';
import { LEASE_INDEX, leaseKeyOf, type ManagedPodsHooks, slimObject } from './managed-pods.ts';
import { isDeleting } from './ownership.ts';
import { annotationsOf, isDeletingObject, type KubeObj, uidOf, type WorkloadApi } from './workload-io.ts';

export const MANAGED_JOBS = 'managed-jobs';

export type JobAction =
  | { kind: 'ignore' }
  | {
      kind: 'remove';
      reason: 'lease-gone' | 'lease-replaced' | 'lease-deleting' | 'lease-stopping';
      nudge: boolean;
    };

/** What managed-jobs does with one Job, pure. */
export function decideJob(job: KubeObj, lease: BerthLease | undefined): JobAction {
  const leaseUID = annotationsOf(job)[MANAGED_UID];
  if (leaseUID === undefined) return { kind: 'ignore' };
  if (lease === undefined) return { kind: 'remove', reason: 'lease-gone', nudge: false };
  if ((lease.metadata.uid ?? '') !== leaseUID)
    return { kind: 'remove', reason: 'lease-replaced', nudge: false };
  if (isDeleting(lease)) return { kind: 'remove', reason: 'lease-deleting', nudge: true };
  if (lease.status?.workload?.phase === WorkloadPhase.Stopping)
    return { kind: 'remove', reason: 'lease-stopping', nudge: true };
  return { kind: 'ignore' };
}

export interface ManagedJobsOptions {
  transport: KubeRequester;
  api: WorkloadApi;
  leases: BerthLeaseApi;
  hooks: Pick<ManagedPodsHooks, 'cachedLease' | 'nudgeLease'>;
  clock: Clock;
  informerClock: Clock;
  informerBackoff?: Partial<BackoffPolicy>;
  maxConcurrentReconciles: number;
  registry?: Registry;
  logger?: Logger;
}

const bindingFingerprint = (o: KubernetesObject): string => {
  const a = o.metadata?.annotations ?? {};
  return JSON.stringify([o.metadata?.uid, a[MANAGED_UID], a[MANAGED_LEASE]]);
};

export class ManagedJobs {
  readonly informer: Informer<KubernetesObject>;
  readonly controller: Controller;
  readonly #o: ManagedJobsOptions;

  constructor(options: ManagedJobsOptions) {
    this.#o = options;
    this.informer = new Informer<KubernetesObject>({
      name: MANAGED_JOBS,
      transport: options.transport,
      resource: { group: 'batch', version: 'v1', plural: 'jobs' },
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
    this.controller = new Controller({
      name: MANAGED_JOBS,
      reconcile: (key, ctx) => this.#reconcile(key, ctx),
      reconcileTimeoutMs: LOCAL_TIMEOUT_MS,
      maxConcurrentReconciles: options.maxConcurrentReconciles,
      clock: options.clock,
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    }).watches(this.informer, {
      predicate: (job, old) => old === undefined || bindingFingerprint(old) !== bindingFingerprint(job),
    });
    this.informer.addEventHandler({
      onDelete: (job) => {
        const key = leaseKeyOf(job.metadata);
        if (key === undefined) return;
        const lease = options.hooks.cachedLease(key);
        if (
          lease !== undefined &&
          (isDeleting(lease) || lease.status?.workload?.phase === WorkloadPhase.Stopping)
        )
          options.hooks.nudgeLease(key);
      },
    });
  }

  /** Re-examines the Jobs of a lease. */
  enqueueForLease(leaseKey: string): void {
    for (const key of this.informer.indexKeys(LEASE_INDEX, leaseKey)) this.controller.enqueue(key);
  }

  async #reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult> {
    const { namespace = '', name } = splitKey(key);
    const { api, leases, hooks } = this.#o;
    const job = await api.get('Job', namespace, name, ctx.signal);
    if (job === undefined) return {};
    const leaseName = annotationsOf(job)[MANAGED_LEASE] ?? '';
    const lease = leaseName === '' ? undefined : await leases.get(namespace, leaseName, ctx.signal);
    const action = decideJob(job, lease);
    if (action.kind === 'ignore') return {};
    if (!isDeletingObject(job)) {
      const suspended = await suspendJob(api, namespace, job, ctx.signal);
      const outcome =
        suspended === undefined ? 'gone' : await api.delete('Job', namespace, name, uidOf(job), ctx.signal);
      ctx.log.info(
        { lease: leaseName, reason: action.reason, outcome },
        'removed a managed Job its lease no longer covers',
      );
    }
    if (action.nudge) hooks.nudgeLease(`${namespace}/${leaseName}`);
    return {};
  }
}
