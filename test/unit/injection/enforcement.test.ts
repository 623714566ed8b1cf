import { describe, expect, it } from 'vitest';
import {
  DEFAULT_PROBE_KILL_GRACE_SECONDS,
  enforcementLeadMs,
  heartbeatMsOf,
  KILL_MARGIN_MS,
  probeKillGraceSeconds,
  RESTART_POD_STOP_MS,
  renewCycleFits,
} from '../../../src/injection/enforcement.ts';

describe('runtime-singleton enforcement timing', () => {
  it("bounds the probe's kill by the enforce grace, or a default far below the Pod's 30 s", () => {
    expect(probeKillGraceSeconds(0)).toBe(DEFAULT_PROBE_KILL_GRACE_SECONDS);
    expect(probeKillGraceSeconds(7)).toBe(7);
  });

  it('leads by a probe period and the kill grace (probe), or the SIGTERM grace (signal), plus the margin', () => {
    expect(enforcementLeadMs('probe', 0, false)).toBe(2_000 + 1_000 + KILL_MARGIN_MS);
    expect(enforcementLeadMs('probe', 10, false)).toBe(2_000 + 10_000 + KILL_MARGIN_MS);
    expect(enforcementLeadMs('signal', 10, false)).toBe(10_000 + KILL_MARGIN_MS);
    expect(enforcementLeadMs('signal', 0, false)).toBe(KILL_MARGIN_MS);
  });

  it("restarting the Pod on a loss, leads by at least the kubelet's kill of every container", () => {
    expect(enforcementLeadMs('probe', 0, true)).toBe(enforcementLeadMs('probe', 0, false));
    expect(enforcementLeadMs('signal', 0, true)).toBe(RESTART_POD_STOP_MS);
    expect(enforcementLeadMs('signal', 10, true)).toBe(10_000 + KILL_MARGIN_MS);
  });

  it('defaults the heartbeat to a third of the TTL, as Go does', () => {
    expect(heartbeatMsOf(30, 0)).toBe(10_000);
    expect(heartbeatMsOf(30, 4)).toBe(4_000);
    expect(heartbeatMsOf(10, 0)).toBeCloseTo(3_333.333, 2);
  });

  it('refuses a renew cycle that does not fit in the TTL once the lead is taken off', () => {
    expect(renewCycleFits(30_000, 10_000, enforcementLeadMs('probe', 0, false))).toBe(true);
    expect(renewCycleFits(12_000, 8_000, enforcementLeadMs('probe', 0, false))).toBe(false);
    expect(renewCycleFits(12_000, 8_000, enforcementLeadMs('probe', 0, false) - 1)).toBe(true);
  });
});
