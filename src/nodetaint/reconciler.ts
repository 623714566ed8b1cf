// The guard's reconcile: read the Node and its agent Pods (from the caches), decide (decide.ts), and at
// the edge write the taint (taint.ts), record the Warning Event, log and count. Per-node memory lives
// here; the controller serialises reconciles per node, so no two reconciles touch one entry at once.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Counter, Gauge, Registry } from 'prom-client';
import { formatDuration } from '../cli.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import type { ReconcileContext, ReconcileResult } from '../kube/controller.ts';
import type { Referenceable } from '../kube/events.ts';
import { getOrCreateCounter, getOrCreateGauge } from '../observability/metrics.ts';
import { DEFAULT_FIELD_MANAGER, type GuardTaint } from './config.ts';
import { decideTaint, type GraceMemory, type GraceWindow, TAINTED } from './decide.ts';
import { type ArmTaintOptions, armTaint, type NodeApi } from './taint.ts';

export const CONTROLLER_NAME = 'node-taint-guard';
export const REARM_EVENT_REASON = 'TaintRearmed';
export const REARM_EVENT_ACTION = 'AddTaint';
/** aether's WARN line, kept verbatim so existing log alerts keep matching. */
export const REARM_LOG_MESSAGE = 're-armed agent-not-ready taint: node had no Ready agent pod past grace';

export interface NodeReader {
  get(name: string): V1Node | undefined;
}

export interface AgentPodReader {
  /** The agent Pods bound to the node (`spec.nodeName`). */
  onNode(nodeName: string): V1Pod[];
}

/** An EventRecorder, or a fake. Must never throw or reject. */
export interface WarningRecorder {
  warning(regarding: Referenceable, reason: string, action: string, note?: string): Promise<void>;
}

export interface NodeTaintMetrics {
  rearms: Counter;
  nodesInGrace: Gauge;
}

export function nodeTaintMetrics(registry: Registry): NodeTaintMetrics {
  return {
    rearms: getOrCreateCounter(registry, {
      name: 'berth_nodetaint_rearms_total',
      help: 'Times the node taint guard added the agent-not-ready taint to a node.',
    }),
    nodesInGrace: getOrCreateGauge(registry, {
      name: 'berth_nodetaint_nodes_in_grace',
      help: 'Nodes with agent pods but none Ready and no taint, whose grace window is running (or whose taint write is being retried).',
    }),
  };
}

export interface NodeTaintReconcilerOptions {
  taint: GuardTaint;
  graceMs: number;
  /** Default `aether-controller`. */
  fieldManager?: string;
  nodes: NodeReader;
  agentPods: AgentPodReader;
  api: NodeApi;
  /** Decides the grace windows. */
  clock?: Clock;
  registry?: Registry;
  recorder?: WarningRecorder;
  /** Retry tuning of the taint write (attempts, delay, its own clock). */
  arm?: Omit<ArmTaintOptions, 'fieldManager' | 'signal'>;
}

export class NodeTaintReconciler {
  readonly #o: NodeTaintReconcilerOptions;
  readonly #clock: Clock;
  readonly #metrics: NodeTaintMetrics | undefined;
  readonly #memory = new Map<string, GraceMemory>();
  #waiting = 0;

  constructor(options: NodeTaintReconcilerOptions) {
    this.#o = options;
    this.#clock = options.clock ?? realClock;
    this.#metrics = options.registry === undefined ? undefined : nodeTaintMetrics(options.registry);
    this.#metrics?.rearms.inc(0);
    this.#metrics?.nodesInGrace.set(0);
  }

  /** The Controller's reconcile function; the key is the Node name. */
  readonly reconcile = (key: string, ctx: ReconcileContext): Promise<ReconcileResult> =>
    this.#reconcile(key, ctx);

  /** What this process remembers about a node (tests, debugging). */
  memoryOf(nodeName: string): GraceMemory | undefined {
    return this.#memory.get(nodeName);
  }

  /** Nodes whose grace window is running (the gauge's value). */
  get nodesInGrace(): number {
    return this.#waiting;
  }

  /** Forgets every node (the guard stopped: a future leader starts from the Pods' conditions). */
  reset(): void {
    this.#memory.clear();
    this.#waiting = 0;
    this.#metrics?.nodesInGrace.set(0);
  }

  async #reconcile(name: string, ctx: ReconcileContext): Promise<ReconcileResult> {
    const node = this.#o.nodes.get(name);
    const pods = node === undefined ? [] : this.#o.agentPods.onNode(name);
    const config = { taintKey: this.#o.taint.key, graceMs: this.#o.graceMs };
    const decision = decideTaint(node, pods, this.#clock.now(), config, this.#memory.get(name));
    this.#remember(name, decision.memory);
    switch (decision.action) {
      case 'forget':
        ctx.log.debug({ reason: decision.reason }, 'nothing to do');
        return {};
      case 'wait':
        ctx.log.debug(
          { windowStart: iso(decision.window.start), windowSource: decision.window.source },
          'no Ready agent pod; within grace',
        );
        return { requeueAfter: decision.requeueAfterMs };
      case 'arm':
        return this.#arm(name, decision.window, ctx);
    }
  }

  async #arm(name: string, window: GraceWindow, ctx: ReconcileContext): Promise<ReconcileResult> {
    const { taint } = this.#o;
    // A thrown error keeps the waiting entry, so the rate-limited retry arms at once.
    const result = await armTaint(this.#o.api, name, taint, {
      ...this.#o.arm,
      fieldManager: this.#o.fieldManager ?? DEFAULT_FIELD_MANAGER,
      signal: ctx.signal,
    });
    if (result.outcome === 'node-gone') {
      this.#remember(name, undefined);
      return {};
    }
    this.#remember(name, TAINTED);
    if (result.outcome === 'already-present') return {};
    const grace = formatDuration(this.#o.graceMs);
    const text = `${taint.key}=${taint.value}:${taint.effect}`;
    this.#metrics?.rearms.inc();
    ctx.log.warn(
      {
        node: name,
        grace,
        taint: text,
        windowStart: iso(window.start),
        windowSource: window.source,
        attempts: result.attempts,
      },
      REARM_LOG_MESSAGE,
    );
    void this.#o.recorder?.warning(
      result.node,
      REARM_EVENT_REASON,
      REARM_EVENT_ACTION,
      `Re-armed taint ${text}: the node has agent pods but none has been Ready since ${iso(window.start)} (grace ${grace})`,
    );
    return {};
  }

  #remember(name: string, memory: GraceMemory | undefined): void {
    const before = this.#memory.get(name)?.state === 'waiting';
    if (memory === undefined) this.#memory.delete(name);
    else this.#memory.set(name, memory);
    const after = memory?.state === 'waiting';
    if (before === after) return;
    this.#waiting += after ? 1 : -1;
    this.#metrics?.nodesInGrace.set(this.#waiting);
  }
}

const iso = (ms: number): string => new Date(ms).toISOString();
