// Fixtures of aether's guard_test.go (agentNS "aether-system", node "node-a") and a fake cluster that
// serves both the cache reads and the API writes of the reconciler, with merge-patch + resourceVersion
// semantics and 409 injection (the Go tests' fake client with WithInterceptorFuncs).
import type { V1Node, V1Pod, V1Taint } from '@kubernetes/client-node';
import { KubeApiError } from '../../../src/kube/client.ts';
import type { ReconcileContext } from '../../../src/kube/controller.ts';
import { parseLabelSelector } from '../../../src/kube/labels.ts';
import type { GuardTaint } from '../../../src/nodetaint/config.ts';
import type { NodeApi, NodeTaintPatch } from '../../../src/nodetaint/taint.ts';
import { createLogger, type Logger } from '../../../src/observability/logger.ts';
import { NodeBuilder } from '../../builders/node.ts';
import { wireTime } from '../../builders/object.ts';
import { PodBuilder } from '../../builders/pod.ts';

export const AGENT_NS = 'aether-system';
export const NODE = 'node-a';
export const TAINT: GuardTaint = { key: 'aether.io/agent-not-ready', value: 'true', effect: 'NoSchedule' };
export const GRACE_MS = 30_000;
export const SCOPE = {
  agentNamespace: AGENT_NS,
  agentSelector: parseLabelSelector('app.kubernetes.io/name=aether-agent'),
};

export function node(name: string, tainted: boolean, extraTaints: V1Taint[] = []): V1Node {
  return new NodeBuilder(name)
    .uid(`uid-${name}`)
    .resourceVersion('1')
    .taints(...extraTaints, ...(tainted ? [{ ...TAINT }] : []))
    .obj();
}

/** Kubernetes timestamps as they arrive from the informer: RFC 3339 strings, whole seconds. */
export const timestamp = (ms: number): Date => wireTime(ms);

export interface PodOptions {
  /** Ready condition lastTransitionTime (ms); none by default, like the Go fixtures. */
  since?: number;
  terminating?: boolean;
  namespace?: string;
  labels?: Record<string, string>;
  /** No Ready condition at all (a Pod the kubelet has not started). */
  noCondition?: boolean;
}

export function agentPod(name: string, nodeName: string, ready: boolean, o: PodOptions = {}): V1Pod {
  const pod = new PodBuilder(name)
    .namespace(o.namespace ?? AGENT_NS)
    .uid(`uid-${name}`)
    .labels(o.labels ?? { 'app.kubernetes.io/name': 'aether-agent' })
    .nodeName(nodeName)
    .containers({ name: 'agent', image: 'aether/agent' })
    .phase('Running');
  if (o.terminating) pod.deleting(0);
  if (o.noCondition) pod.conditions();
  else pod.ready(ready, o.since);
  return pod.obj();
}

export function setReady(pod: V1Pod, ready: boolean, since?: number): void {
  const cond = pod.status?.conditions?.find((c) => c.type === 'Ready');
  if (cond === undefined) throw new Error('pod has no Ready condition');
  cond.status = ready ? 'True' : 'False';
  if (since !== undefined) cond.lastTransitionTime = timestamp(since);
}

const clone = <T>(value: T): T => structuredClone(value);

const conflict = (name: string): KubeApiError =>
  new KubeApiError(409, {
    kind: 'Status',
    status: 'Failure',
    reason: 'Conflict',
    code: 409,
    message: `Operation cannot be fulfilled on nodes "${name}": the object has been modified; please apply your changes to the latest version and try again`,
  });

const notFound = (name: string): KubeApiError =>
  new KubeApiError(404, {
    kind: 'Status',
    reason: 'NotFound',
    code: 404,
    message: `nodes "${name}" not found`,
  });

export interface RecordedPatch {
  name: string;
  body: NodeTaintPatch;
  fieldManager: string;
  /** The body carried metadata.resourceVersion (an optimistic lock). */
  locked: boolean;
}

/** One store serving the reconciler's cache reads (NodeReader/AgentPodReader) and API calls (NodeApi). */
export class FakeCluster implements NodeApi {
  readonly nodes = new Map<string, V1Node>();
  pods: V1Pod[] = [];
  readonly patches: RecordedPatch[] = [];
  gets = 0;
  /** Answer the next N patches with 409 (Infinity: always). */
  conflicts = 0;
  /** Called before each patch is applied (e.g. to simulate a concurrent writer). */
  beforePatch: ((attempt: number) => void) | undefined;
  #rv = 100;

  add(n: V1Node): this {
    this.nodes.set(n.metadata!.name!, clone(n));
    return this;
  }

  /** A write by someone else: bumps the resourceVersion. */
  update(name: string, mutate: (n: V1Node) => void): void {
    const n = this.nodes.get(name);
    if (n === undefined) throw new Error(`no node ${name}`);
    mutate(n);
    n.metadata!.resourceVersion = String(++this.#rv);
  }

  taintsOf(name: string): V1Taint[] {
    return this.nodes.get(name)?.spec?.taints ?? [];
  }

  /** How many taints with the guard's key the node has. */
  keyCount(name: string): number {
    return this.taintsOf(name).filter((t) => t.key === TAINT.key).length;
  }

  // ---- cache side ----
  readonly nodeReader = { get: (name: string): V1Node | undefined => this.nodes.get(name) };
  /** Like aether's agentPodState, returns every agent Pod; the decision filters by spec.nodeName. */
  readonly podReader = { onNode: (_name: string): V1Pod[] => this.pods };

  // ---- API side ----
  async getNode(name: string): Promise<V1Node> {
    this.gets++;
    const n = this.nodes.get(name);
    if (n === undefined) throw notFound(name);
    return clone(n);
  }

  async mergePatchNode(
    name: string,
    patch: NodeTaintPatch,
    options: { fieldManager: string },
  ): Promise<V1Node> {
    const body = clone(patch);
    this.patches.push({
      name,
      body,
      fieldManager: options.fieldManager,
      locked: typeof body.metadata?.resourceVersion === 'string',
    });
    this.beforePatch?.(this.patches.length);
    if (this.conflicts > 0) {
      this.conflicts--;
      throw conflict(name);
    }
    const n = this.nodes.get(name);
    if (n === undefined) throw notFound(name);
    if (body.metadata.resourceVersion !== n.metadata?.resourceVersion) throw conflict(name);
    n.spec = { ...n.spec, taints: body.spec.taints };
    n.metadata!.resourceVersion = String(++this.#rv);
    return clone(n);
  }
}

export interface LogCapture {
  logger: Logger;
  lines(): Array<Record<string, unknown>>;
}

export function captureLogs(): LogCapture {
  const out: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (line: string) => out.push(line) } });
  return { logger, lines: () => out.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

export function reconcileContext(name: string, log?: Logger, signal?: AbortSignal): ReconcileContext {
  return {
    signal: signal ?? new AbortController().signal,
    log: log ?? createLogger({ level: 'silent' }),
    reconcileID: 'test',
    namespace: undefined,
    name,
  };
}
