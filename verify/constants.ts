// The constants and timing rules of the Promela models, taken from the code itself (docs/verification.md,
// "Tied to the code"). Every value is computed by calling the product's own functions and constants
// for a profile (a BerthLease spec, leader election flags and a tick length), and every timing rule the
// models implement is probed against the function that implements it in the code; a rule that no longer
// holds throws, naming it. `renderConstants()` is the text of verify/constants.pml; a unit test fails
// when the file and the code drift apart (regenerate with `npm run verify:constants`). Pure.
import {
  ACQUIRE_TIMEOUT_MS,
  type BerthLease,
  DEFAULT_STOP_LEAD_MS,
  RELEASE_TIMEOUT_MS,
  REQUEUE_ON_FAILURE_MS,
  SCOPE_ENABLED,
  SCOPE_LEAVING,
  SCOPE_SETTLE_MS,
  workloadActiveAt,
} from '../src/berth/api.ts';
import { POD_KILL_MARGIN_MS, podStopGraceSeconds } from '../src/berth/drain.ts';
import {
  failoverMarginProblem,
  leaderFailoverBoundMs,
  stopLeadProblem,
} from '../src/berth/failover-margin.ts';
import {
  acquireBudgetMs,
  acquireErrorRequeueMs,
  activationEnd,
  heldRequeueMs,
  ownershipDeadline,
  reacquireIntervalMs,
} from '../src/berth/ownership.ts';
import { formatTime } from '../src/berth/status.ts';
import { decideAcquire, decideRelease } from '../src/central/manager.ts';
import { isExpired } from '../src/central/record.ts';
import { validateLeaderTimings } from '../src/kube/leader-decision.ts';
import { decideLeaseScope, settleLeft } from '../webhooks/scope.ts';
import { heldRecord, helperConstants } from './helper-constants.ts';

/** One bound of the models: a BerthLease spec, the operator's leader election flags, a tick. */
export interface Profile {
  /**
   * 1: the CI bounds (inside `npm test`); 2: the deeper bounds of `npm run verify`; 3: the defaults (a
   * 30 s TTL, a 10 s heartbeat, the default leader election) at half-second ticks, for the failover check.
   */
  id: 1 | 2 | 3;
  name: string;
  tickMs: number;
  ttlSeconds: number;
  heartbeatSeconds: number;
  leaderElection: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
  /** The operator's `--stop-lead`, a whole number of ticks. */
  stopLeadMs: number;
}

export const PROFILES: readonly Profile[] = [
  {
    id: 1,
    name: 'ci',
    tickMs: 1_000,
    ttlSeconds: 6,
    heartbeatSeconds: 2,
    // Short leader election timings so that a leader failover fits the small TTL (a configuration, not
    // a code change: --leader-election-lease-duration=1s --renew-deadline=600ms --retry-period=400ms).
    leaderElection: { leaseDurationMs: 1_000, renewDeadlineMs: 600, retryPeriodMs: 400 },
    // One tick (--stop-lead=1s): the largest lead a 6 s TTL with a 2 s heartbeat holds (2 + 2 + 1 < 6).
    stopLeadMs: 1_000,
  },
  {
    id: 2,
    name: 'deep',
    tickMs: 1_000,
    ttlSeconds: 24,
    heartbeatSeconds: 2,
    // The operator's defaults (15 s, 10 s, 2 s; a 5 s stop lead).
    leaderElection: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 },
    stopLeadMs: DEFAULT_STOP_LEAD_MS,
  },
  {
    id: 3,
    name: 'defaults',
    tickMs: 500,
    ttlSeconds: 30,
    heartbeatSeconds: 10,
    leaderElection: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 },
    stopLeadMs: DEFAULT_STOP_LEAD_MS,
  },
];

/** A #define of constants.pml: its value in ticks and where it comes from. */
export interface ModelConstant {
  name: string;
  value: number;
  source: string;
}

/** A rule the models implement that the code no longer follows. */
export class RuleDrift extends Error {
  constructor(rule: string, detail: string) {
    super(`the model's rule "${rule}" no longer matches the code: ${detail} (docs/verification.md)`);
    this.name = 'RuleDrift';
  }
}

const check = (rule: string, ok: boolean, detail: string): void => {
  if (!ok) throw new RuleDrift(rule, detail);
};

/** `ms` in whole ticks; a duration that is not a whole number of ticks cannot be modelled exactly. */
function ticks(ms: number, tickMs: number, what: string): number {
  const t = ms / tickMs;
  check(
    'durations are whole ticks',
    Number.isInteger(t),
    `${what} is ${ms} ms, not a multiple of ${tickMs} ms`,
  );
  return t;
}

/** A whole second, far from any edge of the epoch (where the code's times live). */
const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);

/** An Active managed lease whose recorded deadline is `deadline`. */
function activeLease(deadline: number): BerthLease {
  return {
    apiVersion: 'berth.skaphos.io/v1alpha1',
    kind: 'BerthLease',
    metadata: { name: 'l', namespace: 'n' },
    spec: {
      leaseName: 'l',
      holderIdentity: 'h',
      ttlSeconds: 1,
      heartbeatIntervalSeconds: 1,
      semantics: 'at-most-once',
    },
    status: { workload: { targetUID: 'u', phase: 'Active', token: 1, deadline: formatTime(deadline) } },
  };
}

/**
 * The ticks before a recorded deadline at which activeAt(now) turns false with the profile's stop lead
 * (docs/behaviour.md §2.3 step 4): the activation ends at deadline − lead. The model's LEAD defaults to it.
 */
function stopLeadTicks(p: Profile): number {
  ticks(p.stopLeadMs, p.tickMs, '--stop-lead');
  const deadline = T0 + 100 * p.tickMs;
  const workload = activeLease(deadline).status?.workload;
  for (let k = 0; k < 100; k++) {
    if (workloadActiveAt(workload, false, deadline - (k + 1) * p.tickMs, p.stopLeadMs)) {
      check(
        'activeAt ends at deadline − lead',
        !workloadActiveAt(workload, false, deadline - k * p.tickMs, p.stopLeadMs),
        'activeAt is true again later',
      );
      return k;
    }
  }
  throw new RuleDrift('activeAt', 'an Active workload is never active before its deadline');
}

/**
 * The model's bound on a deleted Pod's stop, GRACE(d) of constants.pml: with d ticks left to the
 * deadline, the code's gracePeriodSeconds for a Pod whose own grace is longer, in ticks. Checked against
 * podStopGraceSeconds for every d the model reaches.
 */
function graceRule(p: Profile): void {
  const perSecond = 1000 / p.tickMs;
  check('a second is whole ticks', Number.isInteger(perSecond), `tick ${p.tickMs} ms`);
  for (let d = 0; d <= 2 * p.ttlSeconds * perSecond; d++) {
    const deadline = T0 + 100_000;
    const now = deadline - d * p.tickMs;
    const model = Math.max(perSecond, Math.trunc((d * p.tickMs - POD_KILL_MARGIN_MS) / 1000) * perSecond);
    const code = (podStopGraceSeconds(3_600, deadline, now) ?? Number.NaN) * perSecond;
    check(
      'grace = max(1 s, floor((left − margin) / 1 s))',
      code === model,
      `${d} ticks left: code ${code}, model ${model}`,
    );
  }
}

/** The timing rules of lease.pml, probed against the functions that implement them. */
function checkLeaseRules(p: Profile): void {
  const ttlMs = p.ttlSeconds * 1000;
  const hbMs = p.heartbeatSeconds * 1000;
  const far = T0 + 1000 * ttlMs;
  // §2.3 step 11: min(start + TTL, central expiry), truncated to the second.
  check(
    'deadline = start + TTL',
    ownershipDeadline(T0, ttlMs, far) === T0 + ttlMs,
    'ownershipDeadline(start, ttl, later expiry) is not start + ttl',
  );
  check(
    'deadline = central expiry when earlier',
    ownershipDeadline(T0, ttlMs, T0 + ttlMs - 2000) === T0 + ttlMs - 2000,
    'ownershipDeadline does not take an earlier central expiry',
  );
  check(
    'deadline truncated to the second',
    ownershipDeadline(T0 + 400, ttlMs, far) === T0 + ttlMs,
    'ownershipDeadline does not truncate to the whole second',
  );
  // §2.9 requeues and bounds, as the model computes them: MIN(x, dl − LEAD) while active (dl > LEAD).
  const lead = p.stopLeadMs;
  for (let left = 1; left <= p.ttlSeconds + 2; left++) {
    const leftMs = left * 1000;
    if (leftMs <= lead) continue;
    const end = activationEnd(activeLease(T0 + leftMs), lead);
    check('activation ends at deadline − lead', end === T0 + leftMs - lead, `activationEnd(+${leftMs})`);
    check(
      'held requeue = min(heartbeat, time to deadline − lead)',
      heldRequeueMs(hbMs, T0 + leftMs, T0, lead) === Math.min(hbMs, leftMs - lead),
      `heldRequeueMs(${hbMs}, +${leftMs}, lead ${lead})`,
    );
    check(
      'acquire bound = min(heartbeat, 2.5 s, time to deadline − lead)',
      acquireBudgetMs(hbMs, T0, end) === Math.min(hbMs, ACQUIRE_TIMEOUT_MS, leftMs - lead),
      `acquireBudgetMs(${hbMs}, +${leftMs}, lead ${lead})`,
    );
    check(
      'acquire error requeue = min(heartbeat, 1 s, time to deadline − lead)',
      acquireErrorRequeueMs(hbMs, T0, end) === Math.min(hbMs, REQUEUE_ON_FAILURE_MS, leftMs - lead),
      `acquireErrorRequeueMs(${hbMs}, +${leftMs}, lead ${lead})`,
    );
  }
  graceRule(p);
  // §3.7: expired strictly after expiresAt; renew keeps the token; a reclaim takes token + 1.
  const rec = heldRecord(ttlMs, T0);
  check(
    'central expiry is strict',
    !isExpired(rec, T0 + ttlMs) && isExpired(rec, T0 + ttlMs + 1),
    'isExpired(record, expiresAt) must be false and true one ms later',
  );
  const renew = decideAcquire(rec, rec.key, 'a', ttlMs, T0 + 1000);
  check(
    'renew in place',
    renew.kind === 'write' && renew.record.fencingToken === 3 && renew.record.renewedAt === T0 + 1000,
    'an acquire by the unexpired holder must renew and keep the token',
  );
  const other = decideAcquire(rec, rec.key, 'b', ttlMs, T0 + ttlMs);
  check('held by other', other.kind === 'held-by-other', 'another holder must be refused until the expiry');
  const reclaim = decideAcquire(rec, rec.key, 'b', ttlMs, T0 + ttlMs + 1);
  check(
    'reclaim takes token + 1',
    reclaim.kind === 'write' && reclaim.record.fencingToken === 4 && reclaim.record.holder === 'b',
    'an expired lease must be reclaimed with the next token',
  );
  const own = decideAcquire(rec, rec.key, 'a', ttlMs, T0 + ttlMs + 1);
  check(
    'own expired lease is reclaimed',
    own.kind === 'write' && own.record.fencingToken === 4,
    'the same holder reclaims an expired lease with the next token',
  );
  const released = decideRelease(rec, 'a', 3, T0);
  check(
    'release tombstones',
    released.kind === 'write' && released.record.holder === '' && released.record.fencingToken === 3,
    'a release by the holder must leave a tombstone with the token',
  );
  check(
    'release of another token conflicts',
    decideRelease(rec, 'a', 2, T0).kind === 'conflict' && decideRelease(rec, 'b', 3, T0).kind === 'conflict',
    'a release by another holder or token must be a 409',
  );
  const tomb = released.kind === 'write' ? released.record : rec;
  check(
    'release of a tombstone is done',
    decideRelease(tomb, 'a', 3, T0).kind === 'done',
    'idempotent release',
  );
  const after = decideAcquire(tomb, rec.key, 'b', ttlMs, T0);
  check(
    'a tombstone is reclaimed at once',
    after.kind === 'write' && after.record.fencingToken === 4,
    'a tombstone must be reclaimable with the next token',
  );
}

/** The largest whole-tick leader failover that `failoverMarginProblem` accepts without a Warning. */
function acceptedFailoverTicks(p: Profile): number {
  const spec = {
    leaseName: 'l',
    holderIdentity: 'h',
    ttlSeconds: p.ttlSeconds,
    heartbeatIntervalSeconds: p.heartbeatSeconds,
    semantics: 'at-most-once' as const,
  };
  let accepted = 0;
  for (let k = 1; k <= 10 * p.ttlSeconds; k++) {
    if (failoverMarginProblem(spec, k * p.tickMs, p.stopLeadMs) === undefined) accepted = k;
    else break;
  }
  return accepted;
}

/** The #defines of lease.pml for one profile. */
export function leaseConstants(p: Profile): ModelConstant[] {
  checkLeaseRules(p);
  const le = p.leaderElection;
  const leProblem = validateLeaderTimings(le);
  check('valid leader election flags', leProblem === undefined, leProblem ?? '');
  const leadProblem = stopLeadProblem(
    {
      leaseName: 'l',
      holderIdentity: 'h',
      ttlSeconds: p.ttlSeconds,
      heartbeatIntervalSeconds: p.heartbeatSeconds,
      semantics: 'at-most-once',
    },
    p.stopLeadMs,
  );
  check('the TTL holds the stop lead', leadProblem === undefined, leadProblem ?? '');
  const ttlMs = p.ttlSeconds * 1000;
  const hbMs = p.heartbeatSeconds * 1000;
  const t = (ms: number, what: string): number => ticks(ms, p.tickMs, what);
  const failoverMs = leaderFailoverBoundMs(le.leaseDurationMs, le.retryPeriodMs);
  return [
    { name: 'TICK_MS', value: p.tickMs, source: 'the length of one tick, in ms' },
    { name: 'TTL', value: t(ttlMs, 'ttlSeconds'), source: `spec.ttlSeconds ${p.ttlSeconds}` },
    {
      name: 'HB',
      value: t(hbMs, 'heartbeatIntervalSeconds'),
      source: `spec.heartbeatIntervalSeconds ${p.heartbeatSeconds}`,
    },
    {
      name: 'ACQ_BUDGET',
      value: t(acquireBudgetMs(hbMs, T0), 'acquire bound'),
      source: `acquireBudgetMs(heartbeat) = min(heartbeat, ACQUIRE_TIMEOUT_MS ${ACQUIRE_TIMEOUT_MS})`,
    },
    {
      name: 'ERR_REQUEUE',
      value: t(acquireErrorRequeueMs(hbMs, T0), 'acquire error requeue'),
      source: 'acquireErrorRequeueMs(heartbeat) = min(heartbeat, REQUEUE_ON_FAILURE_MS)',
    },
    {
      name: 'REQUEUE_FAIL',
      value: t(REQUEUE_ON_FAILURE_MS, 'REQUEUE_ON_FAILURE_MS'),
      source: 'REQUEUE_ON_FAILURE_MS (drain in progress, after a stop, failed release)',
    },
    {
      name: 'REACQUIRE',
      value: t(reacquireIntervalMs(hbMs, ttlMs), 'reacquire interval'),
      source: 'reacquireIntervalMs(heartbeat, ttl) (a standby polls)',
    },
    {
      name: 'RELEASE_BUDGET',
      value: Math.floor(RELEASE_TIMEOUT_MS / p.tickMs),
      source: `RELEASE_TIMEOUT_MS ${RELEASE_TIMEOUT_MS}, in whole ticks (an unanswered release fails at the last tick before its bound)`,
    },
    {
      name: 'FAILOVER',
      value: Math.ceil(failoverMs / p.tickMs),
      source: `leaderFailoverBoundMs(${le.leaseDurationMs}, ${le.retryPeriodMs}) = ${failoverMs} ms, rounded up`,
    },
    {
      name: 'FAILOVER_ACCEPTED',
      value: acceptedFailoverTicks(p),
      source:
        'the largest failover bound (whole ticks) failoverMarginProblem accepts for this spec without its Warning',
    },
    {
      name: 'STOP_LEAD',
      value: stopLeadTicks(p),
      source: `--stop-lead=${p.stopLeadMs / 1000}s: ticks before the recorded deadline at which workloadActiveAt turns false`,
    },
    {
      name: 'POD_KILL_MARGIN_MS',
      value: POD_KILL_MARGIN_MS,
      source: 'POD_KILL_MARGIN_MS, in ms: a bounded Pod grace ends this long before the deadline',
    },
    {
      name: 'GRACE_MIN',
      value: t(
        1000 * (podStopGraceSeconds(3_600, T0, T0 + 1000 * ttlMs) ?? Number.NaN),
        'the shortest grace',
      ),
      source: 'podStopGraceSeconds past the deadline (its floor), in ticks',
    },
  ];
}

/**
 * The scope model's tick per profile (scope.pml): an abstract tick coarser than the lease model's, so
 * that its ages (views, `since`, timers) stay few. SCOPE_SETTLE is SCOPE_SETTLE_MS in these ticks.
 */
export const SCOPE_TICK_MS: Readonly<Record<Profile['id'], number>> = { 1: 2_500, 2: 1_250, 3: 1_000 };

/** The settle rule of scope.pml, probed against webhooks/scope.ts. */
function checkScopeRules(): void {
  const enabled = { value: SCOPE_ENABLED, since: T0, resourceVersion: '1' };
  check(
    'settled once SCOPE_SETTLE_MS passed, not before',
    decideLeaseScope('n', enabled, T0 + SCOPE_SETTLE_MS).allowed &&
      !decideLeaseScope('n', enabled, T0 + SCOPE_SETTLE_MS - 1).allowed,
    'decideLeaseScope must admit exactly SCOPE_SETTLE_MS after since',
  );
  check(
    'entry only from enabled',
    !decideLeaseScope('n', { ...enabled, value: SCOPE_LEAVING }, T0 + 10 * SCOPE_SETTLE_MS).allowed &&
      !decideLeaseScope('n', 'out', T0).allowed &&
      !decideLeaseScope('n', undefined, T0).allowed,
    'a leaving, outside or unknown namespace must refuse a BerthLease with a target',
  );
  check(
    'the exit settles on leaving',
    settleLeft({ ...enabled, value: SCOPE_LEAVING }, SCOPE_LEAVING, T0 + SCOPE_SETTLE_MS) === 0 &&
      settleLeft(enabled, SCOPE_LEAVING, T0 + SCOPE_SETTLE_MS) === undefined,
    'settleLeft must count the leaving value only',
  );
}

/** The #defines of scope.pml for one profile. */
export function scopeConstants(p: Profile): ModelConstant[] {
  checkScopeRules();
  const tickMs = SCOPE_TICK_MS[p.id];
  return [
    { name: 'SCOPE_TICK_MS', value: tickMs, source: "the scope model's tick, in ms" },
    {
      name: 'SCOPE_SETTLE',
      value: ticks(SCOPE_SETTLE_MS, tickMs, 'SCOPE_SETTLE_MS'),
      source: `SCOPE_SETTLE_MS ${SCOPE_SETTLE_MS} (src/berth/api.ts), in scope ticks`,
    },
  ];
}

const HEADER = `/*
 * GENERATED from the code by verify/constants.ts; do not edit. Regenerate: npm run verify:constants.
 * A unit test (test/unit/verify/constants.test.ts) fails when this file and the code drift apart.
 * Values are in ticks unless named otherwise; PROFILE 1 is the CI bound, 2 the deeper one, 3 the defaults.
 */
#ifndef PROFILE
#define PROFILE 1
#endif
`;

const GRACE_MACRO = `/* the code's bounded Pod grace (drain.ts podStopGraceSeconds, a Pod whose own grace is longer) with d
   ticks left to the deadline, in ticks: max(1 s, floor((d - margin) / 1 s)); checked against the code */
#define GRACE_FIT(d) (((d) * TICK_MS - POD_KILL_MARGIN_MS) / 1000 * (1000 / TICK_MS))
#define GRACE(d) (GRACE_FIT(d) > GRACE_MIN -> GRACE_FIT(d) : GRACE_MIN)
`;

/** The text of verify/constants.pml. */
export function renderConstants(profiles: readonly Profile[] = PROFILES): string {
  const blocks = profiles.map((p) => {
    const lines = [...leaseConstants(p), ...helperConstants(p.id, p.tickMs), ...scopeConstants(p)].map(
      (c) => `#define ${c.name} ${c.value} /* ${c.source} */`,
    );
    return `#if PROFILE == ${p.id} /* ${p.name}: ttlSeconds ${p.ttlSeconds}, heartbeat ${p.heartbeatSeconds} s, tick ${p.tickMs} ms */\n${lines.join('\n')}\n#endif\n`;
  });
  return `${HEADER}\n${blocks.join('\n')}\n${GRACE_MACRO}`;
}
