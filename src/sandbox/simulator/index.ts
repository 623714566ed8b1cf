// Workload simulation for the sandbox: stand-ins for kube-controller-manager's workload controllers, the
// scheduler and the kubelet, so that Deployments, StatefulSets, ReplicaSets, Jobs and CronJobs run in the
// sandbox as in a cluster. Enabled with `startSandbox({ simulateWorkloads: true })` or
// `berth-operator sandbox --simulate-workloads`.
//
// Every controller reads the Store (an always-fresh informer cache) and writes through ObjectService as a
// real client with the real controller's identity — `system:serviceaccount:kube-system:<name>-controller`,
// `system:kube-scheduler`, `system:node:<node>` — so the admission chain (mutating and validating
// webhooks), validation, resourceVersion conflicts and the graceful deletion of Pods apply exactly as in a
// cluster: a webhook can gate or deny the Pods a ReplicaSet creates, and sees every `pods/binding`. Work is
// driven by Store changes (like gc.ts), queued per controller with per-key serialisation, retried with
// exponential backoff (`retryBaseMs` doubling up to `retryMaxMs`) on any error, 409 conflicts included
// (the next attempt re-reads); a key that changed while its reconcile was failing waits for the backoff
// too, so a failing controller cannot spin. Timers are cleared and in-flight work awaited on stop().
//
// What is simulated (details in each module's header):
// - deployments.ts (+ rollout.ts, the pure arithmetic): Deployment -> ReplicaSet
//   `<name>-<pod-template-hash>`, RollingUpdate / Recreate rollouts, proportional scaling, revision
//   history, status and conditions.
// - replicasets.ts: ReplicaSet -> Pods `<rs>-<random>`, status, ReplicaFailure (FailedCreate) on errors.
// - statefulsets.ts: StatefulSet -> Pods `<sts>-0..N-1`, OrderedReady / Parallel, rolling updates, status.
// - jobs.ts: Job -> Pods, completions / parallelism / backoffLimit / activeDeadlineSeconds / suspend /
//   ttlSecondsAfterFinished, status and conditions (Complete, Failed, Suspended, ...).
// - cronjobs.ts: CronJob -> Job on its cron schedule (cron.ts), suspend, concurrencyPolicy, history
//   limits; the annotation `sandbox.berth.skaphos.io/trigger=<new value>` runs it once now.
// - scheduler.ts: binds ungated, unbound Pods to feasible Nodes round-robin through pods/binding.
// - kubelet.ts: bound Pods become Running/Ready after `kubeletReadyDelayMs`; Pods with restartPolicy
//   Never/OnFailure succeed after `jobRunMs` (per Pod: annotations `sandbox.berth.skaphos.io/run-ms` and
//   `.../exit-code`); terminating Pods are removed after min(grace, `terminationGraceMs`). When the sandbox
//   has no Node, the Node `sandbox-node-1` (option `nodeName`) is registered at start.
//
// Shared pieces: common.ts (pure helpers), context.ts (what controllers get), queue.ts (the work queue).
//
// Not simulated: DaemonSets, ControllerRevisions, PVCs and volumes, Services/Endpoints, Events, resource
// accounting, affinity, probes and container restarts, node heartbeats and the node lifecycle controller,
// Pod disruption budgets, adoption of orphaned Pods by label selector. The garbage collector that removes
// the Pods of a deleted ReplicaSet or Job is the sandbox's own (gc.ts), always on.
import type { ObjectService } from '../objects.ts';
import type { Registry } from '../registry.ts';
import type { Change, Store } from '../store.ts';
import {
  type ResolvedSimulatorOptions,
  resolveTypes,
  type SimContext,
  type SimController,
} from './context.ts';
import { cronJobController } from './cronjobs.ts';
import { deploymentController } from './deployments.ts';
import { jobController } from './jobs.ts';
import { ensureNode, kubeletController } from './kubelet.ts';
import { WorkQueue } from './queue.ts';
import { replicaSetController } from './replicasets.ts';
import { schedulerController } from './scheduler.ts';
import { statefulSetController } from './statefulsets.ts';

export interface SimulatorOptions {
  /** Delay between a Pod's binding and the kubelet reporting it Running and Ready. Default 50 ms. */
  kubeletReadyDelayMs?: number;
  /** Upper bound of a terminating Pod's grace period before the kubelet removes it. Default 200 ms. */
  terminationGraceMs?: number;
  /** Run time of Pods with restartPolicy Never/OnFailure before they succeed. Default 100 ms. */
  jobRunMs?: number;
  /** First retry delay after a failed reconcile, doubled per failure. Default 20 ms. */
  retryBaseMs?: number;
  /** Upper bound of the retry delay. Default 1000 ms. */
  retryMaxMs?: number;
  /** Name of the Node registered when the sandbox has none. Default `sandbox-node-1`. */
  nodeName?: string;
  /** Told about every failed reconcile (conflicts and admission denials included). */
  onError?: (controller: string, key: string, error: unknown) => void;
}

export interface SimulatorDeps {
  store: Store;
  registry: Registry;
  objects: ObjectService;
  /** The sandbox's wall clock. */
  now: () => number;
}

export interface Simulator {
  /** True when no controller has queued, running or timed work (for tests that wait for quiescence). */
  idle(): boolean;
  stop(): Promise<void>;
}

export function resolveOptions(options: SimulatorOptions = {}): ResolvedSimulatorOptions {
  const ms = (v: number | undefined, fallback: number, name: string): number => {
    if (v === undefined) return fallback;
    if (!Number.isFinite(v) || v < 0)
      throw new Error(`workload simulator: ${name} must be a non-negative number`);
    return v;
  };
  return {
    kubeletReadyDelayMs: ms(options.kubeletReadyDelayMs, 50, 'kubeletReadyDelayMs'),
    terminationGraceMs: ms(options.terminationGraceMs, 200, 'terminationGraceMs'),
    jobRunMs: ms(options.jobRunMs, 100, 'jobRunMs'),
    retryBaseMs: Math.max(1, ms(options.retryBaseMs, 20, 'retryBaseMs')),
    retryMaxMs: ms(options.retryMaxMs, 1000, 'retryMaxMs'),
    nodeName: options.nodeName ?? 'sandbox-node-1',
  };
}

/** Starts every simulated controller; registers the default Node first when the sandbox has none. */
export async function startSimulator(
  deps: SimulatorDeps,
  options: SimulatorOptions = {},
): Promise<Simulator> {
  const resolved = resolveOptions(options);
  const ctx: SimContext = {
    store: deps.store,
    objects: deps.objects,
    types: resolveTypes(deps.registry),
    now: deps.now,
    elapsed: () => performance.now(),
    options: resolved,
  };
  await ensureNode(ctx);
  const controllers: SimController[] = [
    deploymentController(ctx),
    replicaSetController(ctx),
    statefulSetController(ctx),
    jobController(ctx),
    cronJobController(ctx),
    schedulerController(ctx),
    kubeletController(ctx),
  ];
  const queues = controllers.map(
    (c) =>
      new WorkQueue((key) => c.reconcile(key), {
        retryBaseMs: resolved.retryBaseMs,
        retryMaxMs: resolved.retryMaxMs,
        onError: options.onError ? (key, error) => options.onError?.(c.name, key, error) : undefined,
      }),
  );
  const observe = (change: Change): void => {
    controllers.forEach((c, i) => {
      let keys: string[];
      try {
        keys = c.keysFor(change);
      } catch {
        return; // a malformed object must not break the Store's other listeners
      }
      for (const key of keys) queues[i]!.add(key);
    });
  };
  const unsubscribe = deps.store.subscribe(observe);
  controllers.forEach((c, i) => {
    for (const key of c.initialKeys()) queues[i]!.add(key);
  });
  return {
    idle: () => queues.every((q) => q.idle()),
    async stop() {
      unsubscribe();
      await Promise.all(queues.map((q) => q.stop()));
    },
  };
}
