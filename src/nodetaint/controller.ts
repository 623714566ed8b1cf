// The guard as a leader-only controller: a Node informer (all Nodes, slimmed to metadata + spec) and an
// agent Pod informer scoped by the API server to the agent namespace and selector, indexed by
// `spec.nodeName`, feed a Controller named `node-taint-guard` whose reconcile is NodeTaintReconciler.
//
// Only events that can change the decision enqueue work: Node adds/deletes and updates that change
// whether the taint key is present (or the Node's uid); agent Pod adds/deletes and updates that change
// its node, Ready condition, or whether it is terminating. Status heartbeats and resourceVersion-only
// changes are dropped before the queue.
//
// Lifecycle, either through the Manager (`runnables()`: the caches on every replica, the controller on
// the leader) or standalone: `start()` on winning leadership (starts the informers if needed, waits for
// their sync, then runs the worker) and `stop()` (drains in-flight reconciles, stops the informers).
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { type BuiltController, ControllerBuilder } from '../kube/builder.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import type { Controller } from '../kube/controller.ts';
import { Informer } from '../kube/informer.ts';
import { matchesLabels } from '../kube/labels.ts';
import type { Runnable } from '../kube/manager.ts';
import type { BackoffPolicy } from '../kube/restart-backoff.ts';
import type { KubeRequester } from '../kube/transport.ts';
import type { Logger } from '../observability/logger.ts';
import type { NodeTaintConfig } from './config.ts';
import { hasTaint } from './decide.ts';
import {
  type AgentPodReader,
  CONTROLLER_NAME,
  type NodeReader,
  NodeTaintReconciler,
  type WarningRecorder,
} from './reconciler.ts';
import { type ArmTaintOptions, nodeApi } from './taint.ts';

/** Index of the agent Pod informer: Pods by `spec.nodeName` (unbound Pods are not filed). */
export const POD_NODE_INDEX = 'spec.nodeName';
/**
 * Bound of one reconcile (a Node GET and a patch, retried on conflict): the guard has one worker, so a
 * hung API call must not hold every other node's taint for the transport's minute-long timeout.
 */
export const RECONCILE_TIMEOUT_MS = 10_000;

type AgentScope = Pick<NodeTaintConfig, 'agentNamespace' | 'agentSelector'>;

/** Whether the Pod is one of the agent's: in the agent namespace and matching the selector. */
export function isAgentPod(pod: V1Pod, scope: AgentScope): boolean {
  return (
    pod.metadata?.namespace === scope.agentNamespace &&
    matchesLabels(scope.agentSelector, pod.metadata?.labels)
  );
}

/** aether's podToNode: the node key of an agent Pod bound to a node, else none. */
export function podToNode(pod: V1Pod, scope: AgentScope): string[] {
  const nodeName = pod.spec?.nodeName;
  return nodeName && isAgentPod(pod, scope) ? [nodeName] : [];
}

/** Node updates that can change the decision: taint key presence, or a different object (uid). */
export function nodeChangeMatters(taintKey: string, node: V1Node, old?: V1Node): boolean {
  if (old === undefined) return true;
  return hasTaint(old, taintKey) !== hasTaint(node, taintKey) || old.metadata?.uid !== node.metadata?.uid;
}

function podFingerprint(pod: V1Pod, scope: AgentScope): string {
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready');
  const transition: unknown = ready?.lastTransitionTime;
  return JSON.stringify([
    pod.metadata?.uid,
    pod.spec?.nodeName ?? '',
    isAgentPod(pod, scope),
    pod.metadata?.deletionTimestamp != null,
    ready?.status ?? '',
    transition instanceof Date ? transition.toISOString() : String(transition ?? ''),
  ]);
}

/** Pod updates that can change the decision (restart counts, probes' messages, IPs, ... cannot). */
export function podChangeMatters(scope: AgentScope, pod: V1Pod, old?: V1Pod): boolean {
  return old === undefined || podFingerprint(old, scope) !== podFingerprint(pod, scope);
}

/** Keeps only what the guard reads of a Node: metadata without managedFields, and spec (taints). */
export function slimNode(node: V1Node): V1Node {
  const { managedFields: _managed, ...metadata } = node.metadata ?? {};
  return { apiVersion: node.apiVersion, kind: node.kind, metadata, spec: node.spec ?? {} };
}

/** Keeps only what the guard reads of a Pod: metadata, spec.nodeName and status.conditions. */
export function slimPod(pod: V1Pod): V1Pod {
  const { managedFields: _managed, ...metadata } = pod.metadata ?? {};
  const nodeName = pod.spec?.nodeName;
  const slim: V1Pod = {
    apiVersion: pod.apiVersion,
    kind: pod.kind,
    metadata,
    status: {
      ...(pod.status?.phase === undefined ? {} : { phase: pod.status.phase }),
      ...(pod.status?.conditions === undefined ? {} : { conditions: pod.status.conditions }),
    },
  };
  // V1PodSpec requires containers; the guard never reads them.
  if (nodeName !== undefined) (slim as { spec?: { nodeName: string } }).spec = { nodeName };
  return slim;
}

export interface NodeTaintGuardOptions {
  config: NodeTaintConfig;
  /** The process's API transport: used by the informers and the taint writer. */
  transport: KubeRequester;
  /** Records the TaintRearmed Warning Event (an EventRecorder). None: no Events. */
  recorder?: WarningRecorder;
  /** Decides grace windows and requeues (tests pass a ManualClock). Default: the real clock. */
  clock?: Clock;
  /** Timeouts and backoff of the informers. Default: the real clock. */
  informerClock?: Clock;
  informerBackoff?: Partial<BackoffPolicy>;
  registry?: Registry;
  logger?: Logger;
  /** Retry tuning of the taint write. */
  arm?: Omit<ArmTaintOptions, 'fieldManager' | 'signal'>;
}

export class NodeTaintGuard {
  readonly name = CONTROLLER_NAME;
  readonly nodes: Informer<V1Node>;
  readonly agentPods: Informer<V1Pod>;
  readonly reconciler: NodeTaintReconciler;
  readonly controller: Controller;
  /** The caches and the controller as runnables; the reconciler forgets its nodes once it stops. */
  readonly #built: BuiltController;

  constructor(options: NodeTaintGuardOptions) {
    const { config } = options;
    const scope: AgentScope = config;
    const common = {
      transport: options.transport,
      clock: options.informerClock ?? realClock,
      ...(options.informerBackoff ? { backoff: options.informerBackoff } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
    };
    this.nodes = new Informer<V1Node>({
      ...common,
      name: `${CONTROLLER_NAME}-nodes`,
      resource: { version: 'v1', plural: 'nodes' },
      transform: slimNode,
    });
    this.agentPods = new Informer<V1Pod>({
      ...common,
      name: `${CONTROLLER_NAME}-agent-pods`,
      resource: { version: 'v1', plural: 'pods', namespace: config.agentNamespace },
      labelSelector: config.agentSelector.text,
      transform: slimPod,
    });
    this.agentPods.addIndexer(POD_NODE_INDEX, (pod) => (pod.spec?.nodeName ? [pod.spec.nodeName] : []));

    const nodes: NodeReader = { get: (name) => this.nodes.getByName(name) };
    const agentPods: AgentPodReader = {
      onNode: (name) => this.agentPods.byIndex(POD_NODE_INDEX, name).filter((p) => isAgentPod(p, scope)),
    };
    this.reconciler = new NodeTaintReconciler({
      taint: config.taint,
      graceMs: config.graceMs,
      fieldManager: config.fieldManager,
      nodes,
      agentPods,
      api: nodeApi(options.transport),
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.recorder ? { recorder: options.recorder } : {}),
      ...(options.arm ? { arm: options.arm } : {}),
    });
    this.#built = new ControllerBuilder(CONTROLLER_NAME)
      .for(this.nodes, { predicate: (node, old) => nodeChangeMatters(config.taint.key, node, old) })
      .watches(this.agentPods, {
        map: (pod) => podToNode(pod, scope),
        predicate: (pod, old) => podChangeMatters(scope, pod, old),
      })
      .withOptions({
        reconcileTimeoutMs: RECONCILE_TIMEOUT_MS,
        ...(options.clock ? { clock: options.clock } : {}),
        ...(options.registry ? { registry: options.registry } : {}),
        ...(options.logger ? { logger: options.logger } : {}),
      })
      .complete(this.reconciler);
    this.controller = this.#built.controller;
  }

  /** Starts listing and watching (idempotent); replicas may call it before leading, for warm caches. */
  startInformers(): void {
    this.#built.startCaches();
  }

  /** Resolves once both caches hold their first list. */
  waitForCaches(signal?: AbortSignal): Promise<void> {
    return this.#built.waitForCaches(signal);
  }

  /**
   * Leader only. Starts the informers if needed, waits for them to sync, then runs the reconcile
   * worker; resolves once running. Aborting `signal` stops the guard. Call once.
   */
  start(signal?: AbortSignal): Promise<void> {
    return this.#built.start(signal);
  }

  /** Finishes in-flight reconciles (unless `grace` aborts first), then stops the informers. */
  stop(grace?: AbortSignal): Promise<void> {
    return this.#built.stop(grace);
  }

  /**
   * The guard as two Manager runnables: its caches on every replica (`node-taint-guard-caches`, so a
   * new leader starts with warm caches), and the controller on the elected leader only.
   */
  runnables(): [Runnable, Runnable] {
    return this.#built.runnables();
  }
}
