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

  it('takes the CI bound from the code: a 6 s TTL, 2 s heartbeat, 2 s acquire bound, activation ending at its deadline', () => {
    const ci = Object.fromEntries(leaseConstants(PROFILES[0]!).map((c) => [c.name, c.value]));
    expect(ci).toMatchObject({ TTL: 6, HB: 2, ACQ_BUDGET: 2, ERR_REQUEUE: 1, REACQUIRE: 2, STOP_LEAD: 0 });
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
