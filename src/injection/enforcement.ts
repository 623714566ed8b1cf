// The timing of runtime-singleton enforcement, shared by the webhook (what it injects, what it refuses)
// and the helper (when it stops the app), so the two cannot disagree (docs/helper.md, "Stopping before
// the lease can expire"). Pure.
import { type Enforcement, PROBE_PERIOD_SECONDS } from './contract.ts';

/** Time allowed, after the probe turns 503 or SIGKILL is sent, for the main containers to be gone. */
export const KILL_MARGIN_MS = 1_000;

/**
 * The liveness probe's own terminationGracePeriodSeconds when the Pod sets no enforce grace: without
 * one, a failed probe kills with the Pod's grace (30 s by default), long after the lease may be another's.
 */
export const DEFAULT_PROBE_KILL_GRACE_SECONDS = 1;

/**
 * With `--injection-restart-pod-on-loss` (restart-pod.ts), the kubelet's kill of every container after
 * the sidecar exits: its pod lifecycle events relist once a second, then the Pod's sync kills without
 * grace; 1 s of margin on top.
 */
export const RESTART_POD_STOP_MS = 3_000;

/** The grace a failed Berth liveness probe gives the container between SIGTERM and SIGKILL. */
export function probeKillGraceSeconds(enforceGraceSeconds: number): number {
  return enforceGraceSeconds > 0 ? enforceGraceSeconds : DEFAULT_PROBE_KILL_GRACE_SECONDS;
}

/**
 * How long before the lease can expire at the server the sidecar starts stopping the main containers, so
 * that they are gone by then. Probe: one probe period (the kubelet may just have probed), the probe's kill
 * grace and the kill margin. Signal: the SIGTERM-to-SIGKILL grace and the kill margin. When the sidecar
 * restarts the Pod on a loss, the kubelet's kill of every container (RESTART_POD_STOP_MS) is the stop,
 * so the lead is at least that; the longer rule stays, as the probe still fences a stuck sidecar.
 */
export function enforcementLeadMs(
  enforce: Enforcement,
  enforceGraceSeconds: number,
  restartPodOnLoss: boolean,
): number {
  const stopping =
    enforce === 'signal'
      ? enforceGraceSeconds
      : PROBE_PERIOD_SECONDS + probeKillGraceSeconds(enforceGraceSeconds);
  const lead = stopping * 1_000 + KILL_MARGIN_MS;
  return restartPodOnLoss ? Math.max(lead, RESTART_POD_STOP_MS) : lead;
}

/** The renew interval: the one given, else a third of the TTL (Go's default), in milliseconds. */
export function heartbeatMsOf(ttlSeconds: number, heartbeatSeconds: number): number {
  return heartbeatSeconds > 0 ? heartbeatSeconds * 1_000 : ttlSeconds > 0 ? (ttlSeconds * 1_000) / 3 : 0;
}

/** What the lead is made of, for messages. */
export function describeLead(enforce: Enforcement, restartPodOnLoss: boolean): string {
  const rule =
    enforce === 'signal'
      ? 'the enforce grace and 1s to kill'
      : "one probe period, the probe's kill grace and 1s to kill";
  return restartPodOnLoss
    ? `${rule}, at least ${RESTART_POD_STOP_MS / 1_000}s for the kubelet to restart the Pod`
    : rule;
}

/**
 * Whether a renew cycle fits: the sidecar stops the app `lead` before the lease can expire, so a
 * heartbeat plus the lead must be shorter than the TTL, or a healthy sidecar would stop its app every
 * cycle.
 */
export function renewCycleFits(ttlMs: number, heartbeatMs: number, leadMs: number): boolean {
  return heartbeatMs + leadMs < ttlMs;
}
