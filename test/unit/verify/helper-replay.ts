// Replays one helper.pml trace on the helper's real decisions (docs/verification.md, "Trace replay on the
// real code"): the central server is the real decideAcquire/decideRenew on a record, the sidecar's view
// of the lease is carried by the real afterRenew/afterReacquire/callBoundMs/probeAnswer, and the model
// supplies the environment only (when a call leaves, reaches the server, is answered or times out; the
// kubelet's probes, kills and restarts). At every step the code must decide what the model decided: each
// call's kind, token and bound, each confirmation and its fenceAt, each loss, the probe's answer at a start
// and at a kill, the server's answers; and the code's own view must keep the invariant the model's
// at-most-once rests on: while a sidecar lets its app run, the server holds the lease for it with that
// token until at least fenceAt + lead. berth-acquire's retry timing is not replayed (the model sends its
// next attempt no later than the code's back-off would).
import { decideAcquire, decideRenew } from '../../../src/central/manager.ts';
import type { LeaseRecord } from '../../../src/central/record.ts';
import { callTimeoutMs } from '../../../src/helper/acquire.ts';
import { configLeadMs, type HelperConfig } from '../../../src/helper/config.ts';
import {
  afterReacquire,
  afterRenew,
  callBoundMs,
  type Decision,
  type LeaseView,
  probeAnswer,
} from '../../../src/helper/decide.ts';
import type { HelperEvent, Pod } from '../../../verify/helper-trace.ts';

const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
const KEY = { namespace: 'n', name: 'l' };
const HOLDERS = ['a', 'b'] as const;
const FRESH = { ok: true, ageMs: 0 } as const;

export interface HelperReplayOptions {
  config: HelperConfig;
  tickMs: number;
  /** RESTART=3: the sidecar restarts the Pod at every loss. */
  restartPod: boolean;
}

export interface HelperReplayReport {
  events: number;
  confirms: number;
  losses: number;
  starts: number;
}

type Phase = 'init' | 'side' | 'down';
/** What the model must print next for the pod, as the code decided it. */
type Effect =
  | { kind: 'confirm'; lease: LeaseView }
  | { kind: 'lose' }
  | { kind: 'acquired'; token: number }
  | { kind: 'restartall' }
  | { kind: 'none' };

interface PodState {
  phase: Phase;
  lease: LeaseView;
  sentAt: number;
  call: 'acquire' | 'renew' | undefined;
  answer: { acquired: boolean; token: number } | undefined;
  maxConfirmed: number;
}

/** The events that are the effect of a decision, printed in the same step as its cause. */
const EFFECTS = new Set(['confirm', 'lose', 'acquired', 'restartall']);

const released = (token: number): LeaseView => ({ held: false, token, fenceAt: undefined });

export function replayHelper(events: readonly HelperEvent[], o: HelperReplayOptions): HelperReplayReport {
  const { config, tickMs } = o;
  const ttlMs = config.ttlSeconds * 1_000;
  const hb = config.heartbeatMs;
  const leadMs = configLeadMs(config);
  const windowMs = ttlMs - leadMs;
  const pods: [PodState, PodState] = [0, 1].map(() => ({
    phase: 'init' as Phase,
    lease: released(0),
    sentAt: 0,
    call: undefined,
    answer: undefined,
    maxConfirmed: 0,
  })) as [PodState, PodState];
  let record: LeaseRecord | undefined;
  /** The effect the code decided at the previous event: the model prints it right after, in one step. */
  let pending: { p: Pod; effect: Effect } | undefined;
  const report: HelperReplayReport = { events: 0, confirms: 0, losses: 0, starts: 0 };

  for (const [i, ev] of events.entries()) {
    const now = T0 + ev.t * tickMs;
    const fail: (what: string) => never = (what) => {
      throw new Error(`event ${i} (t=${ev.t} ${ev.kind}${'p' in ev ? ` ${ev.p}` : ''}): ${what}`);
    };
    report.events++;
    const mine = pending !== undefined && 'p' in ev && ev.p === pending.p;
    const due = mine ? pending?.effect : undefined;
    if (pending !== undefined && pending.effect.kind !== 'none' && (!mine || due?.kind !== ev.kind))
      fail(`the code decided "${pending.effect.kind}" for pod ${pending.p}, the model did not`);
    if (mine && due?.kind === 'none' && EFFECTS.has(ev.kind))
      fail(`the model did "${ev.kind}" where the code decided nothing`);
    pending = undefined;
    if (ev.kind === 'init') continue;
    const s = pods[ev.p];
    const then = (effect: Effect): void => {
      pending = { p: ev.p, effect };
    };
    const decide = (d: Decision): void => {
      s.lease = d.lease;
      then(
        d.action === 'confirm'
          ? { kind: 'confirm', lease: d.lease }
          : d.action === 'lose'
            ? { kind: 'lose' }
            : { kind: 'none' },
      );
    };

    switch (ev.kind) {
      case 'send': {
        const boundMs = ev.bound * tickMs;
        if (s.phase === 'init') {
          if (ev.call !== 'acquire') fail('berth-acquire sends only acquisitions');
          if (boundMs !== callTimeoutMs(hb))
            fail(`bound ${boundMs} ms, the code's callTimeoutMs ${callTimeoutMs(hb)} ms`);
        } else if (s.phase === 'side') {
          const { lease } = s;
          if (lease.fenceAt !== undefined && now >= lease.fenceAt)
            fail('the model renews where the code stops the app (local deadline reached)');
          const want = lease.held ? 'renew' : 'acquire';
          if (ev.call !== want) fail(`the model sends ${ev.call}, the code ${want}`);
          if (want === 'renew' && ev.tok !== lease.token)
            fail(`renews token ${ev.tok}, the code ${lease.token}`);
          const codeBound = Math.max(1, callBoundMs(lease, now, hb));
          if (boundMs !== codeBound) fail(`bound ${boundMs} ms, the code's ${codeBound} ms`);
        } else fail('a Pod being restarted sends nothing');
        s.sentAt = now;
        s.call = ev.call;
        s.answer = undefined;
        break;
      }
      case 'srv': {
        const holder = HOLDERS[ev.p];
        let acquired = false;
        if (ev.call === 'acquire') {
          const d = decideAcquire(record, KEY, holder, ttlMs, now);
          if (d.kind === 'token-exhausted') fail('token exhausted');
          if (d.kind === 'write') {
            record = d.record;
            acquired = true;
          }
        } else {
          const d = decideRenew(record, holder, ev.tok, ttlMs, now);
          if (d.kind === 'write') {
            record = d.record;
            acquired = true;
          }
        }
        if (ev.cur) s.answer = { acquired, token: record?.fencingToken ?? 0 };
        break;
      }
      case 'ans': {
        const a = s.answer;
        if (a === undefined) fail('an answer to a call the server never answered');
        if (a.acquired !== ev.acq || a.token !== ev.tok)
          fail(
            `the server answered acquired=${a.acquired} token ${a.token}, the model acq=${ev.acq} tok=${ev.tok}`,
          );
        const value = {
          acquired: a.acquired,
          holder: a.acquired ? HOLDERS[ev.p] : HOLDERS[1 - ev.p]!,
          fencingToken: a.token,
          expiresAt: undefined,
          acquiredAt: undefined,
        };
        if (s.phase === 'init') {
          then(a.acquired ? { kind: 'acquired', token: a.token } : { kind: 'none' });
        } else if (ev.call === 'renew') {
          decide(afterRenew(s.lease, { ok: true, value }, s.sentAt, now, windowMs));
        } else decide(afterReacquire(s.lease, { ok: true, value }, s.sentAt, now, windowMs));
        s.call = undefined;
        break;
      }
      case 'err': {
        if (s.phase === 'side' && s.call === 'renew')
          decide(afterRenew(s.lease, { ok: false, error: new Error('no answer') }, s.sentAt, now, windowMs));
        else then({ kind: 'none' });
        s.call = undefined;
        break;
      }
      case 'acquired': {
        if (due?.kind !== 'acquired' || due.token !== ev.tok)
          fail(`acquired token ${ev.tok} without the code winning it`);
        // Sidecar.start adopts the handoff: held, not yet confirmed.
        s.phase = 'side';
        s.lease = { held: true, token: ev.tok, fenceAt: undefined };
        break;
      }
      case 'confirm': {
        if (due?.kind !== 'confirm') fail('a confirmation the code did not decide');
        const fenceAt = now + ev.fence * tickMs;
        if (due.lease.token !== ev.tok || due.lease.fenceAt !== fenceAt)
          fail(
            `confirmed token ${ev.tok} until +${ev.fence} ticks, the code token ${due.lease.token} until ${due.lease.fenceAt! - now} ms`,
          );
        if (ev.tok < s.maxConfirmed) fail(`confirmed token ${ev.tok} after ${s.maxConfirmed}`);
        s.maxConfirmed = ev.tok;
        report.confirms++;
        break;
      }
      case 'fence': {
        if (s.lease.fenceAt !== now)
          fail(`the fence fires at ${ev.t}, the code's fenceAt is ${s.lease.fenceAt}`);
        then({ kind: 'lose' });
        break;
      }
      case 'lose': {
        // Without a decision just before: the tick at or past the local deadline (Sidecar's #renew).
        if (due === undefined && (s.lease.fenceAt === undefined || now < s.lease.fenceAt))
          fail('a loss before the local deadline that no answer explains');
        s.lease = released(s.lease.token);
        report.losses++;
        if (o.restartPod) then({ kind: 'restartall' });
        break;
      }
      case 'restartall':
        if (!o.restartPod || due?.kind !== 'restartall')
          fail('a restart of the Pod the sidecar did not ask for');
        s.phase = 'down';
        s.call = undefined;
        break;
      case 'reinit':
        if (s.phase !== 'down') fail('init containers run again without a restart of the Pod');
        s.phase = 'init';
        s.lease = released(s.lease.token);
        break;
      case 'start':
        if (s.phase !== 'side' || probeAnswer(s.lease, '', FRESH, 'm').status !== 200)
          fail('a main container starts while the code answers /healthy with 503');
        report.starts++;
        break;
      case 'kill':
        if (s.phase === 'side' && probeAnswer(s.lease, '', FRESH, 'm').status === 200)
          fail('the kubelet kills on a failed probe while the code answers /healthy with 200');
        break;
      default:
        break;
    }

    // The code's own view: an app allowed to run is backed by the server until fenceAt + lead.
    for (const p of [0, 1] as const) {
      const { phase, lease } = pods[p];
      if (phase !== 'side' || lease.fenceAt === undefined || !lease.held || now >= lease.fenceAt) continue;
      const r = record;
      if (r === undefined || r.holder !== HOLDERS[p] || r.fencingToken !== lease.token)
        fail(
          `pod ${p} runs its app with token ${lease.token} while the server holds ${r?.holder}/${r?.fencingToken}`,
        );
      if (lease.fenceAt + leadMs > r.renewedAt + r.ttlMs)
        fail(
          `pod ${p} may run until ${lease.fenceAt - T0} ms, less than the lead before the server's expiry ${r.renewedAt + r.ttlMs - T0} ms`,
        );
    }
  }
  return report;
}
