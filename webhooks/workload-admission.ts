// WorkloadAdmission's handlers for the admission server: /mutate-managed-workloads and
// /validate-managed-workloads, and with the opt-in scope /validate-admission-scope (scope.ts). Each review
// gets its own AdmissionIO, opened on its first read and bound to the review's deadline, and its reads
// counted and timed (berth_webhook_api_reads_total, ..._api_read_duration_seconds, ..._api_reads_per_review).
import type { Registry } from 'prom-client';
import {
  AdmissionScope,
  MUTATE_WORKLOADS_PATH,
  VALIDATE_SCOPE_PATH,
  VALIDATE_WORKLOADS_PATH,
} from '../src/berth/api.ts';
import { type Clock, realClock } from '../src/kube/clock.ts';
import type { KubeRequester } from '../src/kube/transport.ts';
import type { ReviewContext } from './admission-http.ts';
import { type AdmissionMode, decideWorkloadAdmission } from './decide-workload.ts';
import { type AdmissionIO, CountingIO, type ReadKind } from './io.ts';
import { kubeAdmissionIO } from './kube-io.ts';
import type { LeaseCache } from './leases.ts';
import { type CounterSeries, type HistogramSeries, readMetrics } from './metrics.ts';
import type { AdmissionRequest, Decision } from './review.ts';
import { decideScopeReview, type ScopeEntries } from './scope.ts';
import type { AdmissionHandler } from './server.ts';

export interface WorkloadAdmissionOptions {
  /** Builds the I/O of one review; kube-io.ts's kubeAdmissionIO over a KubeTransport in production. */
  io: (signal: AbortSignal) => AdmissionIO;
  /** `--workload-operator-user`. */
  operatorUser: string;
  /** `--workload-admission-scope`: with opt-in, the scope's guards are served too. */
  scope: AdmissionScope;
  /** The namespaces of the scope as this replica sees them (the guards'); without it, none is known. */
  scopeEntries?: ScopeEntries;
  /** The BerthLease informer (every replica keeps it); without it, every lease lookup is a live read. */
  leaseCache?: LeaseCache;
  registry: Registry;
  clock?: Clock;
  /** `--stop-lead`: no gate is lifted and no Pod bound within it of the lease's deadline. */
  stopLeadMs?: number;
}

const READ_KINDS: readonly ReadKind[] = ['list-leases', 'get-lease', 'get-workload', 'list-stamped'];

export function workloadAdmissionHandlers(options: WorkloadAdmissionOptions): AdmissionHandler[] {
  const metrics = readMetrics(options.registry);
  const clock = options.clock ?? realClock;
  const now = (): number => clock.now();
  const entries: ScopeEntries = options.scopeEntries ?? { entry: () => undefined };
  const handler = (
    path: string,
    decide: (request: AdmissionRequest, io: AdmissionIO) => Promise<Decision>,
  ): AdmissionHandler => {
    const series = (kind: ReadKind): { count: CounterSeries; seconds: HistogramSeries } => ({
      count: metrics.reads.labels({ webhook: path, kind }),
      seconds: metrics.readSeconds.labels({ webhook: path, kind }),
    });
    const readsOf = new Map(READ_KINDS.map((kind) => [kind, series(kind)]));
    const countRead = (kind: ReadKind, seconds: number): void => {
      const s = readsOf.get(kind);
      s?.count.inc();
      s?.seconds.observe(seconds);
    };
    const readsPerReview = metrics.readsPerReview.labels({ webhook: path });
    return {
      path,
      async review(request: AdmissionRequest, ctx: ReviewContext) {
        // Opened on the first read: most Pod CREATEs (no controller owner) are decided without one.
        const io = new CountingIO(options.io, ctx, countRead);
        try {
          return await decide(request, io);
        } finally {
          readsPerReview.observe(io.reads);
        }
      },
    };
  };
  const workloads = (mode: AdmissionMode) => (request: AdmissionRequest, io: AdmissionIO) =>
    decideWorkloadAdmission(request, mode, {
      io,
      now,
      operatorUser: options.operatorUser,
      ...(options.stopLeadMs === undefined ? {} : { stopLeadMs: options.stopLeadMs }),
      ...(options.leaseCache ? { leaseCache: options.leaseCache } : {}),
    });
  return [
    handler(MUTATE_WORKLOADS_PATH, workloads('mutate')),
    handler(VALIDATE_WORKLOADS_PATH, workloads('validate')),
    ...(options.scope === AdmissionScope.OptIn
      ? [
          handler(VALIDATE_SCOPE_PATH, (request, io) =>
            decideScopeReview(request, { io, scope: entries, operatorUser: options.operatorUser, now }),
          ),
        ]
      : []),
  ];
}

/** The production wiring: the handlers reading the API server through the process's transport. */
export function kubeWorkloadAdmission(
  options: Omit<WorkloadAdmissionOptions, 'io'> & { transport: KubeRequester },
): AdmissionHandler[] {
  const { transport, ...rest } = options;
  return workloadAdmissionHandlers({ ...rest, io: (signal) => kubeAdmissionIO(transport, signal) });
}
