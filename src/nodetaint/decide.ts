// The guard's decision, pure: given a Node (or its absence), the agent Pods bound to it, the time and
// what this process remembers about the node, say what to do. Kept in aether's order (docs/nodetaint.md §2.3):
//
//   1. node gone                                  -> forget
//   2. no agent Pod object bound to the node      -> forget, never taint (ineligible node)
//   3. a Ready, non-terminating agent Pod         -> forget (the guard never removes the taint)
//   4. the taint key already present (any value)  -> forget (idempotent)
//   5. within grace                               -> requeue after exactly the remaining time
//   6. otherwise                                  -> arm the taint
//
// The grace window (better than the original, whose in-memory window restarts on a leader change):
// it starts at the moment the node's agent Pods became not Ready, read from their Ready condition's
// `lastTransitionTime`, so a new leader continues the window instead of restarting it. Rules:
//   - Evidence is used only when EVERY not-Ready agent Pod on the node has a Ready condition that is
//     not "True" with a `lastTransitionTime` that is not in the future; the window then starts at the
//     latest of them. Otherwise (no Ready condition yet, a terminating Pod still reporting Ready=True,
//     a timestamp ahead of our clock) it starts at this process's first observation, as in aether.
//   - Kubernetes timestamps have one-second precision: a whole-second `lastTransitionTime` is read as
//     the end of that second, so the taint is never armed before the grace has surely elapsed.
//   - After this process has seen the taint on the node (or armed it), the next window starts no
//     earlier than its first observation of the node without the taint, exactly as in aether. The
//     agent removes the taint when it is serving, which can be a few seconds before the kubelet flips
//     its Pod to Ready; measuring from the Pod's old NotReady transition would re-arm at once and
//     start a taint fight (aether #740).
import type { V1Node, V1Pod } from '@kubernetes/client-node';

export interface DecideConfig {
  /** Taint key; presence is checked by key only (any value or effect counts as armed). */
  taintKey: string;
  /** Grace period in milliseconds (> 0). */
  graceMs: number;
}

/** What this process remembers about one node (aether's `missingSince`, plus the taint marker). */
export type GraceMemory =
  | {
      state: 'waiting';
      /** This process's first observation of the node without a Ready agent Pod (and untainted). */
      firstSeen: number;
      /** The window began after this process saw the taint: it cannot start before `firstSeen`. */
      afterTaint: boolean;
    }
  | {
      /** This process last saw the taint on the node, or armed it. */
      state: 'tainted';
    };

export type ForgetReason = 'node-gone' | 'no-agent-pod' | 'agent-ready' | 'already-tainted';
export type WindowSource = 'ready-condition' | 'first-observation';

export interface GraceWindow {
  /** When the node's grace window started (ms since the epoch). */
  start: number;
  source: WindowSource;
  /** start + grace. */
  due: number;
}

export type TaintDecision =
  | { action: 'forget'; reason: ForgetReason; memory: GraceMemory | undefined }
  | { action: 'wait'; requeueAfterMs: number; window: GraceWindow; memory: GraceMemory }
  /** `memory` is kept if the write fails, so the retry arms at once; on success use TAINTED. */
  | { action: 'arm'; window: GraceWindow; memory: GraceMemory };

/** The memory after a successful arm (or after seeing the taint). */
export const TAINTED: GraceMemory = Object.freeze({ state: 'tainted' });

/** Whether the node carries a taint with `key` (any value, any effect), like aether's `taint.Has`. */
export function hasTaint(node: V1Node | undefined, key: string): boolean {
  return (node?.spec?.taints ?? []).some((t) => t.key === key);
}

/** The Pod's first condition of type Ready, as aether's podReady reads it. */
function readyCondition(pod: V1Pod): { status?: string; lastTransitionTime?: unknown } | undefined {
  return pod.status?.conditions?.find((c) => c.type === 'Ready');
}

/** Ready condition "True" and not terminating; phase and container statuses are ignored. */
export function isServingAgent(pod: V1Pod): boolean {
  return pod.metadata?.deletionTimestamp == null && readyCondition(pod)?.status === 'True';
}

/** Milliseconds of a timestamp as the informer (string) or client-node (Date) delivers it. */
export function timestampMs(value: unknown): number | undefined {
  const ms =
    value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : Number.NaN;
  return Number.isFinite(ms) ? ms : undefined;
}

/**
 * When this not-Ready Pod stopped being Ready, per its Ready condition: the latest instant its
 * second-precision `lastTransitionTime` can stand for. Undefined when the Pod gives no such evidence.
 */
export function notReadySince(pod: V1Pod, now: number): number | undefined {
  const cond = readyCondition(pod);
  if (cond === undefined || cond.status === 'True') return undefined;
  const at = timestampMs(cond.lastTransitionTime);
  if (at === undefined || at > now) return undefined;
  return at % 1000 === 0 ? at + 999 : at;
}

/** Latest not-Ready transition over the Pods, or undefined unless every Pod gives evidence. */
function evidenceStart(pods: readonly V1Pod[], now: number): number | undefined {
  let latest: number | undefined;
  for (const pod of pods) {
    const since = notReadySince(pod, now);
    if (since === undefined) return undefined;
    latest = latest === undefined ? since : Math.max(latest, since);
  }
  return latest;
}

/**
 * Decides for one node. `agentPods` are the agent Pods bound to it (others are ignored: only
 * `spec.nodeName === node name` counts); `memory` is what this process remembered for the node.
 */
export function decideTaint(
  node: V1Node | undefined,
  agentPods: readonly V1Pod[],
  now: number,
  config: DecideConfig,
  memory?: GraceMemory,
): TaintDecision {
  if (node === undefined) return { action: 'forget', reason: 'node-gone', memory: undefined };
  const name = node.metadata?.name;
  const onNode = agentPods.filter((p) => name !== undefined && p.spec?.nodeName === name);
  if (onNode.length === 0) return { action: 'forget', reason: 'no-agent-pod', memory: undefined };
  if (onNode.some(isServingAgent)) return { action: 'forget', reason: 'agent-ready', memory: undefined };
  if (hasTaint(node, config.taintKey))
    return { action: 'forget', reason: 'already-tainted', memory: TAINTED };

  const waiting: GraceMemory =
    memory?.state === 'waiting'
      ? memory
      : { state: 'waiting', firstSeen: now, afterTaint: memory?.state === 'tainted' };
  const evidence = evidenceStart(onNode, now);
  let window: Omit<GraceWindow, 'due'> =
    evidence === undefined
      ? { start: waiting.firstSeen, source: 'first-observation' }
      : { start: evidence, source: 'ready-condition' };
  if (waiting.afterTaint && waiting.firstSeen > window.start)
    window = { start: waiting.firstSeen, source: 'first-observation' };
  const due = window.start + config.graceMs;
  const full: GraceWindow = { ...window, due };
  if (due > now) return { action: 'wait', requeueAfterMs: due - now, window: full, memory: waiting };
  return { action: 'arm', window: full, memory: waiting };
}
