// stopAndRelease (docs/behaviour.md §2.4): stop and drain a managed workload first, then Release the
// central lease with the recorded holder and token; on deletion remove the finalizer once released,
// otherwise write the stopped status. The finalizer is kept until the release succeeds or conflicts.

import { describeError } from '../kube/client.ts';
import type { ReconcileResult } from '../kube/controller.ts';
import { FINALIZER, RELEASE_TIMEOUT_MS, REQUEUE_ON_FAILURE_MS } from './api.ts';
import { centralErrorMessage } from './central-error.ts';
import type { LeaseReporter } from './lease-reporter.ts';
import { isLeaseConflict, type LeaseClient } from './leaseclient.ts';
import type { BerthLeaseApi } from './leaseio.ts';
import { isDeleting, releaseIdentity, shouldRelease } from './ownership.ts';
import { stoppedStatus } from './status.ts';
import { LeaseEventAction, LeaseEventReason } from './transitions.ts';
import type { LeaseRun, WorkloadManager } from './workload-manager.ts';

/** How far one stopAndRelease got. */
export type StopOutcome = 'draining' | 'release-failed' | 'stopped' | 'removed';

export interface StopAndReleaseDeps {
  api: BerthLeaseApi;
  leaseClient: LeaseClient;
  workloads: WorkloadManager;
  reporter: LeaseReporter;
  /** The lease's finalizer is gone: drop what the reconciler remembers of it. */
  forget(namespace: string, name: string): void;
}

export async function stopAndRelease(
  run: LeaseRun,
  deps: StopAndReleaseDeps,
): Promise<{ result: ReconcileResult; outcome: StopOutcome }> {
  if (run.lease.spec.target !== undefined) {
    const progress = await deps.workloads.stopWorkload(run);
    if (progress === 'pending')
      return { result: { requeueAfter: REQUEUE_ON_FAILURE_MS }, outcome: 'draining' };
  }
  const lease = run.lease;
  const { namespace = '', name } = lease.metadata;
  const id = releaseIdentity(lease);
  if (shouldRelease(id)) {
    const note = `lease ${JSON.stringify(id.leaseName)} held as ${JSON.stringify(id.holder)} with fencing token ${id.fencingToken}`;
    try {
      await deps.leaseClient.release(namespace, id.leaseName, id.holder, id.fencingToken, {
        signal: run.signal,
        timeoutMs: RELEASE_TIMEOUT_MS,
      });
      run.log.info({ leaseName: id.leaseName, fencingToken: id.fencingToken }, 'released');
      deps.reporter.event(
        lease,
        'normal',
        LeaseEventReason.Released,
        LeaseEventAction.Release,
        `released ${note}`,
      );
    } catch (err) {
      if (!isLeaseConflict(err)) {
        if (run.signal.aborted) throw err;
        // The finalizer stays until the release succeeds or conflicts.
        run.log.error({ err: describeError(err) }, 'central release failed; retrying');
        deps.reporter.event(
          lease,
          'warning',
          LeaseEventReason.ReleaseFailed,
          LeaseEventAction.Release,
          `${note}: ${centralErrorMessage(err)}`,
        );
        return { result: { requeueAfter: REQUEUE_ON_FAILURE_MS }, outcome: 'release-failed' };
      }
      run.log.info(
        { leaseName: id.leaseName, fencingToken: id.fencingToken },
        'release conflicted: not ours any more',
      );
      deps.reporter.event(
        lease,
        'normal',
        LeaseEventReason.Released,
        LeaseEventAction.Release,
        `${note} was already held by another identity or token`,
      );
    }
    deps.reporter.released(lease);
  }
  if (isDeleting(lease)) {
    const finalizers = (lease.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
    await deps.api.setFinalizers(lease, finalizers, run.signal);
    run.log.info('finalizer removed');
    deps.forget(namespace, name);
    return { result: {}, outcome: 'removed' };
  }
  await run.writeStatus(stoppedStatus(lease.status, run.stamp()));
  return { result: { requeueAfter: REQUEUE_ON_FAILURE_MS }, outcome: 'stopped' };
}
