// WorkloadAdmission's two handlers for the admission server: /mutate-managed-workloads and
// /validate-managed-workloads, each review getting its own AdmissionIO bound to the review's deadline and
// its reads counted (berth_webhook_api_reads_total, berth_webhook_api_reads_per_review).
import type { KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { MUTATE_WORKLOADS_PATH, VALIDATE_WORKLOADS_PATH } from '../src/berth/api.ts';
import { KubeTransport } from '../src/kube/client.ts';
import { type Clock, realClock } from '../src/kube/clock.ts';
import { type AdmissionMode, decideWorkloadAdmission } from './decide-workload.ts';
import { type AdmissionIO, countingIO } from './io.ts';
import { kubeAdmissionIO } from './kube-io.ts';
import { readMetrics } from './metrics.ts';
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
  const handler = (path: string, mode: AdmissionMode): AdmissionHandler => ({
    path,
    async review(request, ctx) {
      let reads = 0;
      const io = countingIO(options.io(ctx.signal), (kind) => {
        reads++;
        metrics.reads.inc({ webhook: path, kind });
      });
      try {
        return await decideWorkloadAdmission(request, mode, {
          io,
          now: () => clock.now(),
          operatorUser: options.operatorUser,
        });
      } finally {
        metrics.readsPerReview.observe({ webhook: path }, reads);
      }
    },
  });
  return [handler(MUTATE_WORKLOADS_PATH, 'mutate'), handler(VALIDATE_WORKLOADS_PATH, 'validate')];
}

export interface KubeWorkloadAdmission {
  handlers: AdmissionHandler[];
  /** Closes the pooled API connections (after the admission server has closed). */
  close(): Promise<void>;
}

/** The production wiring: both handlers reading the API server directly through `kc`'s identity. */
export function kubeWorkloadAdmission(
  options: Omit<WorkloadAdmissionOptions, 'io'> & { kc: KubeConfig },
): KubeWorkloadAdmission {
  const transport = new KubeTransport(options.kc);
  const { kc: _kc, ...rest } = options;
  return {
    handlers: workloadAdmissionHandlers({ ...rest, io: (signal) => kubeAdmissionIO(transport, signal) }),
    close: () => transport.close(),
  };
}
