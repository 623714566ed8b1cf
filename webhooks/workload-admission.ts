// WorkloadAdmission's two handlers for the admission server: /mutate-managed-workloads and
// /validate-managed-workloads, each review getting its own AdmissionIO, opened on its first read and bound to
// the review's deadline, and its reads counted and timed (berth_webhook_api_reads_total, ..._api_read_duration_seconds,
// ..._api_reads_per_review).
import type { Registry } from 'prom-client';
import { MUTATE_WORKLOADS_PATH, VALIDATE_WORKLOADS_PATH } from '../src/berth/api.ts';
import { type Clock, realClock } from '../src/kube/clock.ts';
import type { KubeRequester } from '../src/kube/transport.ts';
import { type AdmissionMode, decideWorkloadAdmission } from './decide-workload.ts';
import { type AdmissionIO, CountingIO, type ReadKind } from './io.ts';
import { kubeAdmissionIO } from './kube-io.ts';
import { type CounterSeries, type HistogramSeries, readMetrics } from './metrics.ts';
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
    const series = (kind: ReadKind): { count: CounterSeries; seconds: HistogramSeries } => ({
      count: metrics.reads.labels({ webhook: path, kind }),
      seconds: metrics.readSeconds.labels({ webhook: path, kind }),
    });
    const readsOf: Record<ReadKind, ReturnType<typeof series>> = {
      'list-leases': series('list-leases'),
      'get-lease': series('get-lease'),
      'get-workload': series('get-workload'),
    };
    const countRead = (kind: ReadKind, seconds: number): void => {
      readsOf[kind].count.inc();
      readsOf[kind].seconds.observe(seconds);
    };
    const readsPerReview = metrics.readsPerReview.labels({ webhook: path });
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
