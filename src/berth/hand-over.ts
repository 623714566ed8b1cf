// The graceful hand-over's loop (docs/behaviour.md §2.4, docs/decisions/0002-hand-over-on-stop.md): when
// the leader stops gracefully, each lease key gets passes (one reconcile-sized attempt each, bounded at
// 5 s) until its workload is released or is not active, or the stop's signal aborts. What one pass does
// is the reconciler's (BerthLeaseReconciler.handOver).
import { setTimeout as sleep } from 'node:timers/promises';
import { describeError } from '../kube/client.ts';
import type { ReconcileContext } from '../kube/controller.ts';
import { splitKey } from '../kube/keys.ts';
import type { Logger } from '../observability/logger.ts';
import { LOCAL_TIMEOUT_MS } from './api.ts';

/** Pause between the passes of a shutdown hand-over while Pods terminate. */
export const HAND_OVER_POLL_MS = 200;

/** What a hand-over achieved per lease key. */
export type HandOverOutcome = 'released' | 'not-active' | 'unfinished';

/** Runs passes for every key at once; never throws (a failed pass is logged and retried). */
export async function handOverAll(
  keys: readonly string[],
  signal: AbortSignal,
  log: Logger,
  pass: (key: string, ctx: ReconcileContext) => Promise<HandOverOutcome>,
  pollMs = HAND_OVER_POLL_MS,
): Promise<Map<string, HandOverOutcome>> {
  const outcomes = new Map<string, HandOverOutcome>();
  await Promise.all(
    keys.map(async (key) => {
      const { namespace, name } = splitKey(key);
      let outcome: HandOverOutcome = 'unfinished';
      for (let n = 1; !signal.aborted; n++) {
        const bound = AbortSignal.any([signal, AbortSignal.timeout(LOCAL_TIMEOUT_MS)]);
        const ctx: ReconcileContext = {
          signal: bound,
          log: log.child({ namespace, name, handOver: n }),
          reconcileID: `hand-over-${n}`,
          namespace,
          name,
        };
        try {
          const result = await pass(key, ctx);
          if (result !== 'unfinished') {
            outcome = result;
            break;
          }
        } catch (err) {
          ctx.log.warn({ err: describeError(err) }, 'hand-over pass failed');
        }
        // Pacing while Pods terminate (real time: no decision depends on it).
        try {
          await sleep(pollMs, undefined, { signal });
        } catch {
          break;
        }
      }
      outcomes.set(key, outcome);
      if (outcome === 'unfinished')
        log.warn({ key }, 'hand-over unfinished: the workload stays Stopping for the next leader');
    }),
  );
  return outcomes;
}
