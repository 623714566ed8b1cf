// verify/constants.pml is generated from the code (verify/constants.ts): this fails when the file and
// the code's constants or timing rules drift apart (docs/verification.md, "Tied to the code").
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  leaseConstants,
  PROFILES,
  RuleDrift,
  renderConstants,
  scopeConstants,
} from '../../../verify/constants.ts';

describe('verify/constants.pml', () => {
  it('is what the code generates (run `npm run verify:constants` after changing a constant)', () => {
    const file = readFileSync(new URL('../../../verify/constants.pml', import.meta.url), 'utf8');
    expect(file).toBe(renderConstants());
  });

  it('takes the CI bound from the code: a 6 s TTL, 2 s heartbeat, 2 s acquire bound, activation ending a tick before its deadline', () => {
    const ci = Object.fromEntries(leaseConstants(PROFILES[0]!).map((c) => [c.name, c.value]));
    expect(ci).toMatchObject({
      TTL: 6,
      HB: 2,
      ACQ_BUDGET: 2,
      ERR_REQUEUE: 1,
      REACQUIRE: 2,
      STOP_LEAD: 1,
      GRACE_MIN: 1,
      POD_KILL_MARGIN_MS: 1000,
      // ttl − heartbeat (4 s) > failover + acquire bound (2 s) + lead (1 s): below a tick.
      FAILOVER_ACCEPTED: 0,
    });
    const defaults = Object.fromEntries(leaseConstants(PROFILES[2]!).map((c) => [c.name, c.value]));
    // 20 s > failover + 2.5 s + 5 s: up to 12 s (24 half-second ticks), below the default 19.4 s.
    expect(defaults).toMatchObject({ STOP_LEAD: 10, GRACE_MIN: 2, FAILOVER: 39, FAILOVER_ACCEPTED: 24 });
  });

  it('refuses a profile whose TTL cannot hold its stop lead, or a lead that is not whole ticks', () => {
    expect(() => leaseConstants({ ...PROFILES[0]!, stopLeadMs: 2_000 })).toThrow(
      /the TTL holds the stop lead/,
    );
    expect(() => leaseConstants({ ...PROFILES[2]!, stopLeadMs: 5_200 })).toThrow(RuleDrift);
  });

  it("takes the scope model's settle period from SCOPE_SETTLE_MS: 5 s in 2.5 s ticks at the CI bound, 1.25 s deeper", () => {
    const settle = (id: number): number | undefined =>
      scopeConstants(PROFILES.find((p) => p.id === id)!).find((c) => c.name === 'SCOPE_SETTLE')?.value;
    expect([settle(1), settle(2), settle(3)]).toEqual([2, 4, 5]);
  });

  it('refuses a bound whose durations are not whole ticks', () => {
    const odd = { ...PROFILES[0]!, tickMs: 700 };
    expect(() => leaseConstants(odd)).toThrow(RuleDrift);
  });
});
