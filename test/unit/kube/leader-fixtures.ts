import type { LeaderElectionRecord } from '../../../src/kube/leader-decision.ts';
import { formatMicroTime } from '../../../src/kube/microtime.ts';

/** The only MicroTime form the API server accepts: six fractional digits. */
export const MICROTIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
export const T0 = Date.UTC(2026, 0, 1);

/** A record held by `other`, acquired and renewed at T0. */
export const record = (over: Partial<LeaderElectionRecord> = {}): LeaderElectionRecord => ({
  holderIdentity: 'other',
  leaseDurationSeconds: 15,
  acquireTime: formatMicroTime(T0),
  renewTime: formatMicroTime(T0),
  leaseTransitions: 3,
  ...over,
});
