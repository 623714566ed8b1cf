// WorkloadAdmission's two handlers for the admission server: /mutate-managed-workloads and
// /validate-managed-workloads, each review getting its own AdmissionIO, opened on its first read and bound to
// the review's deadline, and its reads counted (berth_webhook_api_reads_total, ..._api_reads_per_review).
import type { Registry } from 'prom-client';
import { MUTATE_WORKLOADS_PATH, VALIDATE_WORKLOADS_PATH } from '../src/berth/api.ts';
import type { KubeRequester } from '../src/kube/client.ts';
import { type Clock, realClock } from '../src/kube/clock.ts';
import { type AdmissionMode, decideWorkloadAdmission } from './decide-workload.ts';
import { type AdmissionIO, CountingIO, type ReadKind } from './io.ts';
import { kubeAdmissionIO } from './kube-io.ts';
import { readMetrics } from './metrics.ts';
import type { CounterSeries } from './plain-metrics.ts';
import type { AdmissionHandler } from './server.ts';

export interface WorkloadAdmissionOptions {
  /** Builds the I/O of one review; kube-io.ts's kubeAdmissionIO over a KubeTransport in production. */
  io: (signal: AbortSignal) => AdmissionIO;
  /** `--workload-operator-user`. */
  operatorUser: string;
  registry: Registry;
  clock?: Clock;
}

export function workloadAdmissionHandlers(options: WorkloadAdmissionOptions): AdmissionHandler[] {
  const metrics = readMetrics(options.registry);
  const clock = options.clock ?? realClock;
  const now = (): number => clock.now();
  const handler = (path: string, mode: AdmissionMode): AdmissionHandler => {
    const readsOf: Record<ReadKind, CounterSeries> = {
      'list-leases': metrics.reads.series({ webhook: path, kind: 'list-leases' }),
      'get-lease': metrics.reads.series({ webhook: path, kind: 'get-lease' }),
      'get-workload': metrics.reads.series({ webhook: path, kind: 'get-workload' }),
    };
    const countRead = (kind: ReadKind): void => readsOf[kind].inc();
    const readsPerReview = metrics.readsPerReview.series({ webhook: path });
    return {
      path,
      async review(request, ctx) {
        // Opened on the first read: most Pod CREATEs (no controller owner) are decided without one.
        const io = new CountingIO(options.io, ctx, countRead);
        try {
          return await decideWorkloadAdmission(request, mode, {
            io,
            now,
            operatorUser: options.operatorUser,
          });
        } finally {
          readsPerReview.observe(io.reads);
        }
      },
    };
  };
  return [handler(MUTATE_WORKLOADS_PATH, 'mutate'), handler(VALIDATE_WORKLOADS_PATH, 'validate')];
}

/** The production wiring: both handlers reading the API server through the process's transport. */
export function kubeWorkloadAdmission(
  options: Omit<WorkloadAdmissionOptions, 'io'> & { transport: KubeRequester },
): AdmissionHandler[] {
  const { transport, ...rest } = options;
  return workloadAdmissionHandlers({ ...rest, io: (signal) => kubeAdmissionIO(transport, signal) });
}
