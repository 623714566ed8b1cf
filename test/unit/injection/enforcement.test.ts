import { describe, expect, it } from 'vitest';
import {
  DEFAULT_PROBE_KILL_GRACE_SECONDS,
  enforcementLeadMs,
  heartbeatMsOf,
  KILL_MARGIN_MS,
  probeKillGraceSeconds,
  renewCycleFits,
} from '../../../src/injection/enforcement.ts';

describe('runtime-singleton enforcement timing', () => {
  it("bounds the probe's kill by the enforce grace, or a default far below the Pod's 30 s", () => {
    expect(probeKillGraceSeconds(0)).toBe(DEFAULT_PROBE_KILL_GRACE_SECONDS);
    expect(probeKillGraceSeconds(7)).toBe(7);
  });

  it('leads by a probe period and the kill grace (probe), or the SIGTERM grace (signal), plus the margin', () => {
    expect(enforcementLeadMs('probe', 0)).toBe(2_000 + 1_000 + KILL_MARGIN_MS);
    expect(enforcementLeadMs('probe', 10)).toBe(2_000 + 10_000 + KILL_MARGIN_MS);
    expect(enforcementLeadMs('signal', 10)).toBe(10_000 + KILL_MARGIN_MS);
    expect(enforcementLeadMs('signal', 0)).toBe(KILL_MARGIN_MS);
  });

  it('defaults the heartbeat to a third of the TTL, as Go does', () => {
    expect(heartbeatMsOf(30, 0)).toBe(10_000);
    expect(heartbeatMsOf(30, 4)).toBe(4_000);
    expect(heartbeatMsOf(10, 0)).toBeCloseTo(3_333.333, 2);
  });

  it('refuses a renew cycle that does not fit in the TTL once the lead is taken off', () => {
    expect(renewCycleFits(30_000, 10_000, enforcementLeadMs('probe', 0))).toBe(true);
    expect(renewCycleFits(12_000, 8_000, enforcementLeadMs('probe', 0))).toBe(false);
    expect(renewCycleFits(12_000, 8_000, enforcementLeadMs('probe', 0) - 1)).toBe(true);
  });
});
