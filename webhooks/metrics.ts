// Admission metrics: controller-runtime's webhook series (so existing dashboards work) plus ours, all
// registered on the injected registry through the get-or-create helpers. A caller that updates a series on
// every review takes its labelled child once (`metric.labels({...})`, a Series) and keeps it.
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import {
  exponentialBuckets,
  getOrCreateCounter,
  getOrCreateGauge,
  getOrCreateHistogram,
} from '../src/observability/metrics.ts';

/** One label set of a metric, taken once with `labels()`. */
export type CounterSeries = ReturnType<Counter['labels']>;
export type GaugeSeries = ReturnType<Gauge['labels']>;
export type HistogramSeries = ReturnType<Histogram['labels']>;

export interface WebhookMetrics {
  /** `code` is the HTTP status of the answer (200 for every AdmissionReview, 4xx for refused requests). */
  requests: Counter<'webhook' | 'code'>;
  latency: Histogram<'webhook'>;
  inFlight: Gauge<'webhook'>;
  /** Handler errors turned into denials (controller-runtime counts recovered panics here). */
  panics: Counter<never>;
  /**
   * Go's metric with Go's meaning: only the reserved state volume's refusals (`GO_REJECTION_REASONS`), so
   * alerts written for the Go operator fire the same. `path`: the resource and subresource reviewed
   * (`pods`, `pods/ephemeralcontainers`).
   */
  rejections: Counter<'reason' | 'path'>;
  /** Ours: every denial of every webhook, by handler path, reason and admission path ('' if unknown). */
  denials: Counter<'webhook' | 'reason' | 'path'>;
  certificateReloadErrors: Counter<never>;
}

/** The reasons Go counts in berth_webhook_admission_rejections_total: a writable mount of `berth-state`. */
export const STATE_MOUNT_REASONS = {
  writableStateMount: 'writable_state_mount',
  writableStateMountEphemeral: 'writable_state_mount_ephemeral',
} as const;
const GO_REJECTION_REASONS: ReadonlySet<string> = new Set(Object.values(STATE_MOUNT_REASONS));

/** Counts one denial: always in berth_webhook_denials_total, and in Go's metric when it is Go's reason. */
export function countDenial(metrics: WebhookMetrics, webhook: string, reason: string, path: string): void {
  metrics.denials.inc({ webhook, reason, path });
  if (GO_REJECTION_REASONS.has(reason)) metrics.rejections.inc({ reason, path });
}

export function webhookMetrics(registry: Registry): WebhookMetrics {
  return {
    requests: getOrCreateCounter(registry, {
      name: 'controller_runtime_webhook_requests_total',
      help: 'Total number of admission requests by HTTP status code.',
      labelNames: ['webhook', 'code'],
    }),
    latency: getOrCreateHistogram(registry, {
      name: 'controller_runtime_webhook_latency_seconds',
      help: 'Histogram of the latency of processing admission requests',
      labelNames: ['webhook'],
      buckets: exponentialBuckets(0.001, 2, 14),
    }),
    inFlight: getOrCreateGauge(registry, {
      name: 'controller_runtime_webhook_requests_in_flight',
      help: 'Current number of admission requests being served.',
      labelNames: ['webhook'],
    }),
    panics: getOrCreateCounter(registry, {
      name: 'controller_runtime_webhook_panics_total',
      help: 'Total number of webhook handler errors turned into denials',
    }),
    rejections: getOrCreateCounter(registry, {
      name: 'berth_webhook_admission_rejections_total',
      help: 'Pod admissions denied for mounting the reserved berth-state volume writable (as in Go), by reason and admission path (resource[/subresource])',
      labelNames: ['reason', 'path'],
    }),
    denials: getOrCreateCounter(registry, {
      name: 'berth_webhook_denials_total',
      help: 'Admission requests denied by any webhook, by webhook path, reason and admission path (resource[/subresource])',
      labelNames: ['webhook', 'reason', 'path'],
    }),
    certificateReloadErrors: getOrCreateCounter(registry, {
      name: 'berth_webhook_certificate_reload_errors_total',
      help: 'Certificate changes the admission server could not apply (the previous pair stays in use)',
    }),
  };
}

export interface ReadMetrics {
  reads: Counter<'webhook' | 'kind'>;
  readSeconds: Histogram<'webhook' | 'kind'>;
  readsPerReview: Histogram<'webhook'>;
}

export function readMetrics(registry: Registry): ReadMetrics {
  return {
    reads: getOrCreateCounter(registry, {
      name: 'berth_webhook_api_reads_total',
      help: 'Direct API server reads made by admission reviews, by kind of read',
      labelNames: ['webhook', 'kind'],
    }),
    readSeconds: getOrCreateHistogram(registry, {
      name: 'berth_webhook_api_read_duration_seconds',
      help: 'Latency of the direct API server reads of admission reviews, by kind of read',
      labelNames: ['webhook', 'kind'],
      buckets: exponentialBuckets(0.001, 2, 14),
    }),
    readsPerReview: getOrCreateHistogram(registry, {
      name: 'berth_webhook_api_reads_per_review',
      help: 'Direct API server reads made by one admission review',
      labelNames: ['webhook'],
      buckets: [0, 1, 2, 3, 4, 5, 6, 8],
    }),
  };
}
