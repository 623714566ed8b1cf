// The helper model's constants come from the helper's own configuration and the webhook's probe
// (verify/helper-constants.ts, docs/verification.md "The helper model"): the CI bound, and the rules
// that would make a profile meaningless.
import { describe, expect, it } from 'vitest';
import { HELPER_PROFILES, helperConfig, helperConstants } from '../../../verify/helper-constants.ts';

describe('verify/helper-constants', () => {
  it('takes the CI bound from the code: a 4 s lead (2 s probe period, 1 s kill grace, 1 s margin), a 3 s window', () => {
    const ci = Object.fromEntries(helperConstants(1, 1_000).map((c) => [c.name, c.value]));
    expect(ci).toMatchObject({
      H_TTL: 7,
      H_HB: 2,
      H_LEAD: 4,
      H_WINDOW: 3,
      H_PERIOD: 2,
      H_FAILS: 1,
      H_GRACE: 1,
      H_MARGIN: 1,
      H_POD_GRACE: 30,
    });
    expect(ci.H_LEAD).toBe(ci.H_PERIOD! + ci.H_GRACE! + ci.H_MARGIN!);
  });

  it('uses profiles the helper itself accepts (heartbeat + lead < ttl)', () => {
    for (const p of Object.values(HELPER_PROFILES))
      expect(() => helperConfig(p.ttlSeconds, p.heartbeatSeconds)).not.toThrow();
    expect(() => helperConfig(6, 2)).toThrow(/enforcement lead/);
  });

  it('refuses a tick that does not divide the durations', () => {
    expect(() => helperConstants(1, 700)).toThrow(/whole ticks/);
  });
});
