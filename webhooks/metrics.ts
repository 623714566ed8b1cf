// Admission metrics: controller-runtime's webhook series (so existing dashboards work) plus ours, all
// registered on the injected registry through the get-or-create helpers.
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import {
  exponentialBuckets,
  getOrCreateCounter,
  getOrCreateGauge,
  getOrCreateHistogram,
} from '../src/observability/metrics.ts';

export interface WebhookMetrics {
  /** `code` is the HTTP status of the answer (200 for every AdmissionReview, 4xx for refused requests). */
  requests: Counter<'webhook' | 'code'>;
  latency: Histogram<'webhook'>;
  inFlight: Gauge<'webhook'>;
  /** Handler errors turned into denials (controller-runtime counts recovered panics here). */
  panics: Counter<never>;
  rejections: Counter<'reason'>;
  certificateReloadErrors: Counter<never>;
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
      help: 'Admission requests denied, by reason',
      labelNames: ['reason'],
    }),
    certificateReloadErrors: getOrCreateCounter(registry, {
      name: 'berth_webhook_certificate_reload_errors_total',
      help: 'Certificate changes the admission server could not apply (the previous pair stays in use)',
    }),
  };
}

export interface ReadMetrics {
  reads: Counter<'webhook' | 'kind'>;
  readsPerReview: Histogram<'webhook'>;
}

export function readMetrics(registry: Registry): ReadMetrics {
  return {
    reads: getOrCreateCounter(registry, {
      name: 'berth_webhook_api_reads_total',
      help: 'Direct API server reads made by admission reviews, by kind of read',
      labelNames: ['webhook', 'kind'],
    }),
    readsPerReview: getOrCreateHistogram(registry, {
      name: 'berth_webhook_api_reads_per_review',
      help: 'Direct API server reads made by one admission review',
      labelNames: ['webhook'],
      buckets: [0, 1, 2, 3, 4, 5, 6, 8],
    }),
  };
}
