// The constants and timing rules of verify/helper.pml (the injected helper), taken from the code itself
// as verify/constants.ts does for the lease model: the helper's configuration is resolved by the
// helper's own resolveConfig for a profile, the lead, the probe and the call bounds come from the
// functions the webhook and the helper use, and every timing rule the model implements is probed against
// the function that implements it (a broken rule throws RuleDrift, naming it). Two values are the
// kubelet's, not this code's: the Pod's default termination grace (hole 2) and the first crash back-off.
// Pure.
import { CLIENT_DEFAULT_TIMEOUT_MS, LeaseConflictError } from '../src/berth/leaseclient.ts';
import { decideRenew } from '../src/central/manager.ts';
import type { LeaseRecord } from '../src/central/record.ts';
import { callTimeoutMs, retryDelayMs } from '../src/helper/acquire.ts';
import { configFromEnv, configLeadMs, type HelperConfig, resolveConfig } from '../src/helper/config.ts';
import {
  afterReacquire,
  afterRenew,
  callBoundMs,
  type LeaseView,
  probeAnswer,
} from '../src/helper/decide.ts';
import { DEFAULT_INJECTION_PROBE_PORT, PROBE_FAILURE_THRESHOLD } from '../src/injection/contract.ts';
import {
  KILL_MARGIN_MS,
  probeKillGraceSeconds,
  RESTART_POD_STOP_MS,
  renewCycleFits,
} from '../src/injection/enforcement.ts';
import { berthLivenessProbe, berthSidecarStartupProbe } from '../src/injection/probe.ts';

/** A helper's lease settings per profile of verify/constants.pml (1: CI, 2: deeper, 3: the defaults). */
export const HELPER_PROFILES: Readonly<Record<1 | 2 | 3, { ttlSeconds: number; heartbeatSeconds: number }>> =
  {
    // The smallest TTL whose renew cycle fits with a 2 s heartbeat: 2 s + the 4 s lead < 7 s.
    1: { ttlSeconds: 7, heartbeatSeconds: 2 },
    2: { ttlSeconds: 12, heartbeatSeconds: 3 },
    // The webhook's defaults: a 30 s TTL (--injection-default-ttl-seconds), the heartbeat ttl/3.
    3: { ttlSeconds: 30, heartbeatSeconds: 0 },
  };

/** Kubernetes' default terminationGracePeriodSeconds: what a probe kill took before hole 2 was fixed. */
export const POD_DEFAULT_GRACE_SECONDS = 30;
/** The kubelet's first crash-loop back-off (10 s, doubling to 5 min): the second restart waits this long. */
export const KUBELET_FIRST_BACKOFF_SECONDS = 10;

interface Constant {
  name: string;
  value: number;
  source: string;
}

class HelperRuleDrift extends Error {
  constructor(rule: string, detail: string) {
    super(`the helper model's rule "${rule}" no longer matches the code: ${detail} (docs/verification.md)`);
    this.name = 'RuleDrift';
  }
}

const check = (rule: string, ok: boolean, detail: string): void => {
  if (!ok) throw new HelperRuleDrift(rule, detail);
};

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);

/** The central record the rules are probed on: holder `a`, token 3, acquired and renewed at `at`. */
export const heldRecord = (ttlMs: number, at: number): LeaseRecord => ({
  key: { namespace: 'n', name: 'l' },
  holder: 'a',
  ttlMs,
  acquiredAt: at,
  renewedAt: at,
  fencingToken: 3,
  version: 1,
});

/** The helper's configuration for a profile, resolved by the helper itself (probe enforcement, no grace). */
export function helperConfig(ttlSeconds: number, heartbeatSeconds: number): HelperConfig {
  const raw = configFromEnv({
    BERTH_LEASE_NAME: 'l',
    POD_NAMESPACE: 'n',
    POD_NAME: 'p',
    POD_UID: 'u',
    BERTH_API_SERVER: 'https://central.example',
    BERTH_TTL_SECONDS: String(ttlSeconds),
    ...(heartbeatSeconds > 0 ? { BERTH_HEARTBEAT_SECONDS: String(heartbeatSeconds) } : {}),
  });
  return resolveConfig(raw);
}

const ok = (acquired: boolean, token: number) =>
  ({
    ok: true,
    value: { acquired, holder: 'h', fencingToken: token, expiresAt: undefined, acquiredAt: undefined },
  }) as const;

/** The timing rules of helper.pml, probed against the functions that implement them. */
function checkHelperRules(config: HelperConfig, windowMs: number): void {
  const hb = config.heartbeatMs;
  const confirmed: LeaseView = { held: true, token: 3, fenceAt: T0 + windowMs };
  const handoff: LeaseView = { held: true, token: 3, fenceAt: undefined };
  const stopped: LeaseView = { held: false, token: 3, fenceAt: undefined };
  const err = { ok: false, error: new Error('timeout') } as const;
  // afterRenew: fenceAt = send + window; a late answer, a refusal or a 409 loses; an error keeps until fenceAt.
  const renewed = afterRenew(confirmed, ok(true, 3), T0 + 1000, T0 + 1000, windowMs);
  check(
    'fenceAt = send + window',
    renewed.action === 'confirm' && renewed.lease.fenceAt === T0 + 1000 + windowMs,
    'afterRenew must confirm until the send time plus the window',
  );
  check(
    'an answer after send + window is lost',
    afterRenew(handoff, ok(true, 3), T0, T0 + windowMs, windowMs).action === 'lose',
    'afterRenew accepts an answer that arrived after its own deadline',
  );
  check(
    'an answer after fenceAt is lost',
    afterRenew(confirmed, ok(true, 3), T0 + 500, T0 + windowMs, windowMs).action === 'lose',
    'afterRenew accepts an answer after the current fenceAt',
  );
  check(
    'a refused renewal loses',
    afterRenew(confirmed, ok(false, 3), T0, T0, windowMs).action === 'lose',
    'afterRenew keeps a lease the server refused',
  );
  check(
    'a 409 loses',
    afterRenew(confirmed, { ok: false, error: new LeaseConflictError('c') }, T0, T0, windowMs).action ===
      'lose',
    'afterRenew keeps a lease after a conflict',
  );
  check(
    'an error keeps until fenceAt',
    afterRenew(confirmed, err, T0, T0 + windowMs - 1, windowMs).action === 'keep' &&
      afterRenew(confirmed, err, T0, T0 + windowMs, windowMs).action === 'lose',
    'afterRenew on an error must keep before fenceAt and lose at it',
  );
  check(
    'an unconfirmed handoff is lost on an error',
    afterRenew(handoff, err, T0, T0, windowMs).action === 'lose',
    'afterRenew keeps an unconfirmed handoff after an error',
  );
  // afterReacquire: confirm only within the window, from the send.
  const re = afterReacquire(stopped, ok(true, 4), T0, T0 + windowMs - 1, windowMs);
  check(
    'a reacquisition confirms until send + window',
    re.action === 'confirm' && re.lease.fenceAt === T0 + windowMs && re.lease.token === 4,
    'afterReacquire must confirm until the send time plus the window',
  );
  check(
    'a late reacquisition waits',
    afterReacquire(stopped, ok(true, 4), T0, T0 + windowMs, windowMs).action === 'wait' &&
      afterReacquire(stopped, ok(false, 4), T0, T0, windowMs).action === 'wait',
    'afterReacquire confirms a late or refused answer',
  );
  // callBoundMs: a heartbeat, or what is left before fenceAt.
  for (let left = 1; left <= 2 * hb; left += 500)
    check(
      'renew bound = min(heartbeat, fenceAt - now)',
      callBoundMs({ held: true, token: 1, fenceAt: T0 + left }, T0, hb) === Math.min(hb, left),
      `callBoundMs(+${left})`,
    );
  check(
    'unconfirmed bound = heartbeat',
    callBoundMs(handoff, T0, hb) === hb && callBoundMs(stopped, T0, hb) === hb,
    'callBoundMs without a fence must be the heartbeat',
  );
  // probeAnswer: 200 only while held and confirmed.
  const fresh = { ok: true, ageMs: 0 } as const;
  check(
    '/healthy is 200 only while confirmed',
    probeAnswer(confirmed, '', fresh, 'm').status === 200 &&
      probeAnswer(handoff, '', fresh, 'm').status === 503 &&
      probeAnswer(stopped, '', fresh, 'm').status === 503,
    'probeAnswer must answer 200 exactly while the lease is held and confirmed',
  );
  // decideRenew: only the unexpired holder with its token renews.
  const ttlMs = config.ttlSeconds * 1000;
  const rec = heldRecord(ttlMs, T0);
  const renew = decideRenew(rec, 'a', 3, ttlMs, T0 + ttlMs);
  check(
    'renew by the unexpired holder',
    renew.kind === 'write' && renew.record.renewedAt === T0 + ttlMs && renew.record.fencingToken === 3,
    'decideRenew must renew the unexpired holder with its token, from the receipt',
  );
  check(
    'renew refused otherwise',
    decideRenew(rec, 'a', 3, ttlMs, T0 + ttlMs + 1).kind === 'refuse' &&
      decideRenew(rec, 'a', 2, ttlMs, T0).kind === 'refuse' &&
      decideRenew(rec, 'b', 3, ttlMs, T0).kind === 'refuse',
    'decideRenew must refuse an expired lease, another token and another holder',
  );
}

/** The #defines of helper.pml for one profile (H_ names: constants.pml is shared by every model). */
export function helperConstants(profile: 1 | 2 | 3, tickMs: number): Constant[] {
  const { ttlSeconds, heartbeatSeconds } = HELPER_PROFILES[profile];
  const config = helperConfig(ttlSeconds, heartbeatSeconds);
  const ttlMs = ttlSeconds * 1000;
  const hb = config.heartbeatMs;
  const leadMs = configLeadMs(config);
  const windowMs = ttlMs - leadMs;
  checkHelperRules(config, windowMs);
  const probe = berthLivenessProbe(DEFAULT_INJECTION_PROBE_PORT, config.enforceGraceMs / 1000);
  const startup = berthSidecarStartupProbe(DEFAULT_INJECTION_PROBE_PORT, ttlSeconds);
  const graceS = probe.terminationGracePeriodSeconds ?? POD_DEFAULT_GRACE_SECONDS;
  check(
    'the probe bounds its kill',
    probe.terminationGracePeriodSeconds === probeKillGraceSeconds(config.enforceGraceMs / 1000),
    'the injected liveness probe must carry the kill grace as its own terminationGracePeriodSeconds',
  );
  check(
    'lead = one probe period + the kill grace + the margin',
    leadMs === (probe.periodSeconds + graceS) * 1000 + KILL_MARGIN_MS,
    `configLeadMs is ${leadMs} ms`,
  );
  check(
    'one failed probe kills',
    probe.failureThreshold === 1 && PROBE_FAILURE_THRESHOLD === 1,
    'the lead counts one probe period; a failure threshold above 1 needs (threshold) periods',
  );
  check('the renew cycle fits', renewCycleFits(ttlMs, hb, leadMs), 'the profile is refused by the helper');
  // RESTART 3 (--injection-restart-pod-on-loss) keeps H_LEAD: the model has one lead for every RESTART.
  check(
    'restarting the Pod keeps the lead, and the kubelet kill fits in it',
    configLeadMs({ ...config, restartPodOnLoss: true }) === leadMs && RESTART_POD_STOP_MS <= leadMs,
    `configLeadMs with restartPodOnLoss is ${configLeadMs({ ...config, restartPodOnLoss: true })} ms, RESTART_POD_STOP_MS ${RESTART_POD_STOP_MS} ms`,
  );
  const t = (ms: number, what: string): number => {
    const v = ms / tickMs;
    check(
      'durations are whole ticks',
      Number.isInteger(v),
      `${what} is ${ms} ms, not a multiple of ${tickMs} ms`,
    );
    return v;
  };
  const errMs = retryDelayMs('error', 1, hb);
  return [
    { name: 'H_TTL', value: t(ttlMs, 'ttl'), source: `BERTH_TTL_SECONDS ${ttlSeconds}` },
    {
      name: 'H_HB',
      value: t(hb, 'heartbeat'),
      source: `resolveConfig: heartbeat ${hb} ms${heartbeatSeconds > 0 ? '' : ' (ttl/3)'}`,
    },
    {
      name: 'H_LEAD',
      value: t(leadMs, 'lead'),
      source: `configLeadMs = enforcementLeadMs(probe, grace 0) = ${leadMs} ms`,
    },
    {
      name: 'H_RESTART_POD',
      value: t(RESTART_POD_STOP_MS, 'restart-pod kill'),
      source:
        "RESTART_POD_STOP_MS: the kubelet's kill of every container after the sidecar's exit (RESTART 3)",
    },
    {
      name: 'H_WINDOW',
      value: t(windowMs, 'window'),
      source: "ttl - lead: fenceAt = send + window (the Sidecar's window)",
    },
    {
      name: 'H_CALL',
      value: t(callTimeoutMs(hb), 'acquire call bound'),
      source: `callTimeoutMs(heartbeat) = min(${CLIENT_DEFAULT_TIMEOUT_MS}, max(1000, heartbeat)) (berth-acquire)`,
    },
    {
      name: 'H_RETRY_HELD',
      value: t(retryDelayMs('held-by-other', 0, hb), 'retry when held'),
      source: "retryDelayMs('held-by-other') (berth-acquire asks again)",
    },
    {
      name: 'H_RETRY_ERR',
      value: Math.ceil(errMs / tickMs),
      source: `retryDelayMs('error', 1) = ${errMs} ms, rounded up (the back-off only doubles from there)`,
    },
    {
      name: 'H_PERIOD',
      value: t(probe.periodSeconds * 1000, 'probe period'),
      source: `berthLivenessProbe periodSeconds ${probe.periodSeconds}`,
    },
    {
      name: 'H_FAILS',
      value: probe.failureThreshold,
      source: 'berthLivenessProbe failureThreshold (failed probes before the kill)',
    },
    {
      name: 'H_GRACE',
      value: t(graceS * 1000, 'kill grace'),
      source: `berthLivenessProbe terminationGracePeriodSeconds ${graceS} (probeKillGraceSeconds(0))`,
    },
    {
      name: 'H_MARGIN',
      value: t(KILL_MARGIN_MS, 'kill margin'),
      source: 'KILL_MARGIN_MS (after the grace, for the container to be gone)',
    },
    {
      name: 'H_STARTUP',
      value: t(startup.periodSeconds * 1000, 'startup probe period'),
      source: "berthSidecarStartupProbe periodSeconds (the main container's first start)",
    },
    {
      name: 'H_POD_GRACE',
      value: t(POD_DEFAULT_GRACE_SECONDS * 1000, 'pod grace'),
      source: "Kubernetes' default terminationGracePeriodSeconds (30 s): the kill of hole 2",
    },
    {
      name: 'H_BACKOFF',
      value: t(KUBELET_FIRST_BACKOFF_SECONDS * 1000, 'kubelet back-off'),
      source: "the kubelet's crash back-off before the second restart (10 s)",
    },
  ];
}
