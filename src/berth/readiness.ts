// The operator's `berth-api` readiness check in lease-only mode (docs/behaviour.md §2.9, §5.1):
// GET /healthz of the central lease API, bounded at 5 s. With workload admission on, the replicas'
// readiness gates the fail-closed webhooks, so the run command does not add it then.
import { READINESS_PING_TIMEOUT_MS } from './api.ts';
import type { LeaseCallOptions } from './leaseclient.ts';

export const CENTRAL_READINESS_CHECK = 'berth-api';

export interface Pingable {
  ping(options?: LeaseCallOptions): Promise<void>;
}

/** A readyz check: resolves when the central API answers /healthz with 2xx within 5 s. */
export function centralReadinessCheck(
  client: Pingable,
  timeoutMs: number = READINESS_PING_TIMEOUT_MS,
): () => Promise<void> {
  return () => client.ping({ timeoutMs });
}
