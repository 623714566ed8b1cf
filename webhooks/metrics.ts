// Admission metrics: controller-runtime's webhook series (so existing dashboards work) plus ours, all
// registered on the injected registry through the get-or-create helpers. The series every review
// updates are plain-metrics.ts's (counted in plain numbers, exported at scrape time); the rest, updated
// only on a denial or a failure, are prom-client's own.
import type { Counter, Registry } from 'prom-client';
import { exponentialBuckets, getOrCreateCounter } from '../src/observability/metrics.ts';
import {
  type PlainCounter,
  type PlainGauge,
  type PlainHistogram,
  plainCounter,
  plainGauge,
  plainHistogram,
} from './plain-metrics.ts';

export interface WebhookMetrics {
  /** `code` is the HTTP status of the answer (200 for every AdmissionReview, 4xx for refused requests). */
  requests: PlainCounter<'webhook' | 'code'>;
  latency: PlainHistogram<'webhook'>;
  inFlight: PlainGauge<'webhook'>;
  /** Handler errors turned into denials (controller-runtime counts recovered panics here). */
  panics: Counter<never>;
  /** `path`: the resource and subresource reviewed (`pods`, `pods/ephemeralcontainers`), '' if unknown. */
  rejections: Counter<'reason' | 'path'>;
  certificateReloadErrors: Counter<never>;
}

export function webhookMetrics(registry: Registry): WebhookMetrics {
  return {
    requests: plainCounter(registry, {
      name: 'controller_runtime_webhook_requests_total',
      help: 'Total number of admission requests by HTTP status code.',
      labelNames: ['webhook', 'code'],
    }),
    latency: plainHistogram(registry, {
      name: 'controller_runtime_webhook_latency_seconds',
      help: 'Histogram of the latency of processing admission requests',
      labelNames: ['webhook'],
      buckets: exponentialBuckets(0.001, 2, 14),
    }),
    inFlight: plainGauge(registry, {
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
      help: 'Admission requests denied, by reason and admission path (resource[/subresource])',
      labelNames: ['reason', 'path'],
    }),
    certificateReloadErrors: getOrCreateCounter(registry, {
      name: 'berth_webhook_certificate_reload_errors_total',
      help: 'Certificate changes the admission server could not apply (the previous pair stays in use)',
    }),
  };
}

export interface ReadMetrics {
  reads: PlainCounter<'webhook' | 'kind'>;
  readsPerReview: PlainHistogram<'webhook'>;
}

export function readMetrics(registry: Registry): ReadMetrics {
  return {
    reads: plainCounter(registry, {
      name: 'berth_webhook_api_reads_total',
      help: 'Direct API server reads made by admission reviews, by kind of read',
      labelNames: ['webhook', 'kind'],
    }),
    readsPerReview: plainHistogram(registry, {
      name: 'berth_webhook_api_reads_per_review',
      help: 'Direct API server reads made by one admission review',
      labelNames: ['webhook'],
      buckets: [0, 1, 2, 3, 4, 5, 6, 8],
    }),
  };
}
