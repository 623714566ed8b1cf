// The sidecar's decisions, pure (docs/helper.md §3.2). The one rule behind them: the main containers may
// run only until `fenceAt`, which is the local time a renewal or acquisition was *sent*, plus the TTL,
// minus the enforcement lead. The server counts the TTL from when it *received* the call, later than
// that, and every clock involved is this node's monotonic timer, so no clock skew and no network delay
// can leave the app running once the server may have handed the lease to someone else.
import type { AcquireResult } from '../berth/leaseclient.ts';
import { isLeaseConflict } from '../berth/leaseclient.ts';
import { formatDuration } from '../cli.ts';
import type { MarkerVerdict } from './state.ts';
import { markerReason } from './state.ts';

export interface LeaseView {
  held: boolean;
  token: number;
  /** Until when the main containers may run; undefined while a handoff is not yet confirmed. */
  fenceAt: number | undefined;
}

/** What to do after a call: keep going, confirm (marker refreshed, app allowed), or stop the app. */
export type Decision =
  | { action: 'keep'; lease: LeaseView; warn?: string }
  | { action: 'confirm'; lease: LeaseView }
  | { action: 'lose'; lease: LeaseView; why: string }
  | { action: 'wait'; lease: LeaseView; why: string };

export type CallResult = { ok: true; value: AcquireResult } | { ok: false; error: unknown };

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

const lost = (lease: LeaseView, why: string): Decision => ({
  action: 'lose',
  lease: { held: false, token: lease.token, fenceAt: undefined },
  why,
});

/**
 * After a renewal sent at `startedAt` and answered (or failed) at `now`; `windowMs` is TTL minus the
 * enforcement lead. Go's tickHeld with the lead subtracted.
 */
export function afterRenew(
  lease: LeaseView,
  result: CallResult,
  startedAt: number,
  now: number,
  windowMs: number,
): Decision {
  if (!result.ok) {
    if (isLeaseConflict(result.error)) return lost(lease, 'renew conflict: lease lost');
    if (lease.fenceAt === undefined || now >= lease.fenceAt)
      return lost(lease, `renew failing past the local lease deadline: ${messageOf(result.error)}`);
    return {
      action: 'keep',
      lease,
      warn: `renew failed; still within the lease deadline (${formatDuration(lease.fenceAt - now)} left), will retry`,
    };
  }
  const res = result.value;
  if (!res.acquired)
    return lost(
      lease,
      `renew reports lease held by another: lease lost (holder ${JSON.stringify(res.holder)})`,
    );
  if (now >= startedAt + windowMs || (lease.fenceAt !== undefined && now >= lease.fenceAt))
    return lost(lease, 'renew answer arrived after its local deadline: lease lost');
  return { action: 'confirm', lease: { held: true, token: res.fencingToken, fenceAt: startedAt + windowMs } };
}

/** After an acquisition attempt while the app is stopped (Go's tickReacquire). */
export function afterReacquire(
  lease: LeaseView,
  result: CallResult,
  startedAt: number,
  now: number,
  windowMs: number,
): Decision {
  if (!result.ok) return { action: 'wait', lease, why: `reacquire failed: ${messageOf(result.error)}` };
  const res = result.value;
  if (!res.acquired)
    return { action: 'wait', lease, why: `waiting to reacquire (holder ${JSON.stringify(res.holder)})` };
  if (now >= startedAt + windowMs)
    return {
      action: 'wait',
      lease,
      why: 'acquire answer arrived after its local deadline; remaining stopped',
    };
  return { action: 'confirm', lease: { held: true, token: res.fencingToken, fenceAt: startedAt + windowMs } };
}

/** The bound of the next call: a heartbeat, or less when the deadline comes first (Go's tickCtx). */
export function callBoundMs(lease: LeaseView, now: number, heartbeatMs: number): number {
  if (!lease.held || lease.fenceAt === undefined) return heartbeatMs;
  return Math.min(heartbeatMs, lease.fenceAt - now);
}

/** The liveness endpoint's answer: 200 only while the lease is confirmed and the marker fresh. */
export function probeAnswer(
  lease: LeaseView,
  lossReason: string,
  verdict: MarkerVerdict,
  markerPath: string,
): { status: 200 | 503; body: string } {
  if (!lease.held || lease.fenceAt === undefined)
    return { status: 503, body: `lease not held: ${lossReason}` };
  if (!verdict.ok) return { status: 503, body: markerReason(verdict, markerPath) };
  return { status: 200, body: 'ok' };
}
