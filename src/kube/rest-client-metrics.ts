// The API client's metrics, named and labelled as client-go's (so dashboards built for Go operators work):
// requests by code, method and host, and their latency by verb and host. Latency runs from sending the
// request to the end of its answer (for a watch or a streamed answer: to its headers), so it holds the
// time a request waited anywhere: on the connection, in the API server's queues, in storage.
import type { Registry } from 'prom-client';
import { getOrCreateCounter, getOrCreateHistogram } from '../observability/metrics.ts';

export interface RestClientMetrics {
  /** `code` is the HTTP status, or `<error>` when there was no answer (as client-go counts it). */
  observe(method: string, host: string, code: number | '<error>', seconds: number): void;
}

/** client-go's buckets for rest_client_request_duration_seconds. */
const BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

export function restClientMetrics(registry: Registry): RestClientMetrics {
  const requests = getOrCreateCounter(registry, {
    name: 'rest_client_requests_total',
    help: 'Number of HTTP requests, partitioned by status code, method, and host.',
    labelNames: ['code', 'method', 'host'],
  });
  const duration = getOrCreateHistogram(registry, {
    name: 'rest_client_request_duration_seconds',
    help: 'Request latency in seconds. Broken down by verb, and host.',
    labelNames: ['verb', 'host'],
    buckets: BUCKETS,
  });
  return {
    observe(method, host, code, seconds) {
      requests.inc({ code: String(code), method, host });
      duration.observe({ verb: method, host }, seconds);
    },
  };
}
