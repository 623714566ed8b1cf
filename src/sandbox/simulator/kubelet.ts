// The kubelets of the sandbox's Nodes (as system:node:<node>), writing Pod status through the status
// subresource: a Pod bound to an existing Node becomes Running with PodReadyToStartContainers,
// Initialized, ContainersReady and Ready conditions, podIP/hostIP, startTime and running containerStatuses
// (init containers completed) `kubeletReadyDelayMs` after the kubelet first sees it bound; Ready follows
// spec.readinessGates (the gates' conditions must be True). A Pod whose restartPolicy is not Always (Job
// Pods) exits `jobRunMs` after it started, Succeeded with exit code 0. A terminating Pod (deletionTimestamp
// set) is removed with gracePeriodSeconds 0 after min(its grace period, `terminationGraceMs`), also when
// its Node is gone (as the Pod GC would).
//
// Per-Pod annotations (on the Pod or its template): `sandbox.berth.skaphos.io/run-ms` overrides jobRunMs
// for that Pod; `sandbox.berth.skaphos.io/exit-code` makes it exit with that code (non-zero: Failed).
// Not simulated: probes, container restarts (OnFailure restarts, CrashLoopBackOff), images, volumes,
// resources, node heartbeats and Lease renewals, eviction, static Pods.
import { rfc3339 } from '../objects.ts';
import type { Change } from '../store.ts';
import type { KubeObject } from '../types.ts';
import {
  arr,
  EXIT_CODE_ANNOTATION,
  fnv32a,
  isNotFound,
  keyOf,
  nameOf,
  namespaceOf,
  nodeNameOf,
  nodeUser,
  type Obj,
  obj,
  podPhase,
  podSpec,
  RUN_MS_ANNOTATION,
  requestContext,
  splitKey,
  str,
} from './common.ts';
import { getObject, type SimContext, type SimController, TYPE_KEYS, writeStatus } from './context.ts';

const ctxFor = (node: string) => requestContext(nodeUser(node), 'kubelet');

interface PodCondition {
  type: string;
  status: 'True' | 'False';
  reason?: string;
  message?: string;
  lastProbeTime: null;
  lastTransitionTime: string;
}

/** Sets a Pod condition, keeping the stored one (and its transition time) when nothing changes. */
function withCondition(
  conditions: Obj[],
  type: string,
  status: 'True' | 'False',
  nowIso: string,
  reason?: string,
  message?: string,
): Obj[] {
  const current = conditions.find((c) => c.type === type);
  if (current && current.status === status && current.reason === reason && current.message === message)
    return conditions;
  const next: PodCondition = {
    type,
    status,
    lastProbeTime: null,
    lastTransitionTime:
      current && current.status === status ? (str(current.lastTransitionTime) ?? nowIso) : nowIso,
  };
  if (reason) next.reason = reason;
  if (message) next.message = message;
  const entry = next as unknown as Obj;
  return current ? conditions.map((c) => (c.type === type ? entry : c)) : [...conditions, entry];
}

/** Ready as the kubelet computes it: containers ready and every readiness gate's condition True. */
export function readiness(pod: KubeObject, conditions: Obj[]): { ready: boolean; message?: string } {
  const missing: string[] = [];
  const notTrue: string[] = [];
  for (const gate of arr(podSpec(pod).readinessGates)) {
    const type = str(gate.conditionType) ?? '';
    const c = conditions.find((x) => x.type === type);
    if (!c) missing.push(type);
    else if (c.status !== 'True') notTrue.push(type);
  }
  if (missing.length === 0 && notTrue.length === 0) return { ready: true };
  const parts = [
    ...missing.map((t) => `corresponding condition of pod readiness gate "${t}" does not exist.`),
    ...notTrue.map((t) => `the status of pod readiness gate "${t}" is not "True", but False`),
  ];
  return { ready: false, message: parts.join(', ') };
}

const hex = (seed: string, length: number): string => {
  let out = '';
  for (let i = 0; out.length < length; i++) out += fnv32a(`${seed}:${i}`).toString(16).padStart(8, '0');
  return out.slice(0, length);
};

function containerIds(pod: KubeObject, name: string, image: string) {
  return {
    image,
    imageID: `${image.includes('/') ? image : `docker.io/library/${image}`}@sha256:${hex(image, 64)}`,
    containerID: `containerd://${hex(`${pod.metadata.uid}/${name}`, 64)}`,
  };
}

/** The status a kubelet reports once the Pod's containers run. */
export function runningStatus(
  pod: KubeObject,
  node: KubeObject,
  podIP: string,
  nowIso: string,
): Record<string, unknown> {
  const status = obj(pod.status);
  const hostIP =
    str(arr(obj(node.status).addresses).find((a) => a.type === 'InternalIP')?.address) ?? '10.0.0.1';
  let conditions = arr(status.conditions);
  conditions = withCondition(conditions, 'PodReadyToStartContainers', 'True', nowIso);
  conditions = withCondition(conditions, 'Initialized', 'True', nowIso);
  conditions = withCondition(conditions, 'ContainersReady', 'True', nowIso);
  const ready = readiness(pod, conditions);
  conditions = ready.ready
    ? withCondition(conditions, 'Ready', 'True', nowIso)
    : withCondition(conditions, 'Ready', 'False', nowIso, 'ReadinessGatesNotReady', ready.message);
  conditions = withCondition(conditions, 'PodScheduled', 'True', nowIso);
  const spec = podSpec(pod);
  const initContainerStatuses = arr(spec.initContainers).map((c) => {
    const name = str(c.name) ?? '';
    const ids = containerIds(pod, name, str(c.image) ?? '');
    return {
      name,
      ...ids,
      ready: true,
      restartCount: 0,
      started: false,
      state: {
        terminated: {
          exitCode: 0,
          reason: 'Completed',
          startedAt: nowIso,
          finishedAt: nowIso,
          containerID: ids.containerID,
        },
      },
    };
  });
  const containerStatuses = arr(spec.containers).map((c) => {
    const name = str(c.name) ?? '';
    return {
      name,
      ...containerIds(pod, name, str(c.image) ?? ''),
      ready: true,
      restartCount: 0,
      started: true,
      state: { running: { startedAt: nowIso } },
      lastState: {},
    };
  });
  const next: Record<string, unknown> = {
    ...status,
    phase: 'Running',
    conditions,
    hostIP,
    hostIPs: [{ ip: hostIP }],
    podIP,
    podIPs: [{ ip: podIP }],
    startTime: str(status.startTime) ?? nowIso,
    containerStatuses,
  };
  if (initContainerStatuses.length > 0) next.initContainerStatuses = initContainerStatuses;
  return next;
}

/** The status after the containers of a run-to-completion Pod exited with `exitCode`. */
export function exitedStatus(pod: KubeObject, exitCode: number, nowIso: string): Record<string, unknown> {
  const status = obj(pod.status);
  const reason = exitCode === 0 ? 'Completed' : 'Error';
  let conditions = arr(status.conditions);
  conditions = withCondition(conditions, 'PodReadyToStartContainers', 'False', nowIso);
  conditions = withCondition(conditions, 'ContainersReady', 'False', nowIso, 'PodCompleted');
  conditions = withCondition(conditions, 'Ready', 'False', nowIso, 'PodCompleted');
  const containerStatuses = arr(status.containerStatuses).map((c) => {
    const startedAt = str(obj(obj(c.state).running).startedAt) ?? nowIso;
    return {
      ...c,
      ready: false,
      started: false,
      state: {
        terminated: {
          exitCode,
          reason,
          startedAt,
          finishedAt: nowIso,
          containerID: c.containerID,
        },
      },
    };
  });
  return {
    ...status,
    phase: exitCode === 0 ? 'Succeeded' : 'Failed',
    conditions,
    containerStatuses,
  };
}

/** The Node the simulator registers when the sandbox has none. */
export function sandboxNode(name: string, nowIso: string): KubeObject {
  const condition = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    reason,
    message,
    lastHeartbeatTime: nowIso,
    lastTransitionTime: nowIso,
  });
  const capacity = { cpu: '8', memory: '32Gi', pods: '110', 'ephemeral-storage': '100Gi' };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/os': 'linux',
        'beta.kubernetes.io/arch': 'amd64',
      },
    },
    spec: { podCIDR: '10.244.0.0/16', podCIDRs: ['10.244.0.0/16'] },
    status: {
      capacity,
      allocatable: capacity,
      conditions: [
        condition(
          'MemoryPressure',
          'False',
          'KubeletHasSufficientMemory',
          'kubelet has sufficient memory available',
        ),
        condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
        condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
        condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'),
      ],
      addresses: [
        { type: 'InternalIP', address: '10.0.0.1' },
        { type: 'Hostname', address: name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        architecture: 'amd64',
        operatingSystem: 'linux',
        osImage: 'berth sandbox',
        kernelVersion: '6.1.0',
        kubeletVersion: 'v1.32.0',
        kubeProxyVersion: 'v1.32.0',
        containerRuntimeVersion: 'containerd://1.7.0',
        machineID: hex(`${name}/machine`, 32),
        systemUUID: hex(`${name}/system`, 32),
        bootID: hex(`${name}/boot`, 32),
      },
    },
  };
}

/** Registers the default Node when there is none (as a kubelet registering itself). */
export async function ensureNode(ctx: SimContext): Promise<void> {
  if (ctx.store.list(TYPE_KEYS.nodes).length > 0) return;
  const name = ctx.options.nodeName;
  await ctx.objects.create(ctx.types.nodes, '', sandboxNode(name, rfc3339(ctx.now())), ctxFor(name));
}

function annotationInt(pod: KubeObject, key: string): number | undefined {
  const v = pod.metadata.annotations?.[key];
  return v !== undefined && /^-?\d+$/.test(v.trim()) ? Number(v) : undefined;
}

export function kubeletController(ctx: SimContext): SimController {
  const { store, objects, types, options } = ctx;
  /** When the kubelet first saw a Pod bound, running, terminating (monotonic ms, by Pod UID). */
  const boundAt = new Map<string, number>();
  const runningAt = new Map<string, number>();
  const terminatingAt = new Map<string, number>();
  let ipCounter = 1;

  const firstSeen = (map: Map<string, number>, uid: string): number => {
    let t = map.get(uid);
    if (t === undefined) {
      t = ctx.elapsed();
      map.set(uid, t);
    }
    return t;
  };
  const runDuration = (pod: KubeObject): number =>
    Math.max(0, annotationInt(pod, RUN_MS_ANNOTATION) ?? options.jobRunMs);
  const runsToCompletion = (pod: KubeObject): boolean =>
    (str(podSpec(pod).restartPolicy) ?? 'Always') !== 'Always';
  const nextIp = (): string => {
    const n = ipCounter++;
    return `10.244.${(n >> 8) & 255}.${n & 255}`;
  };

  const nowIso = (): string => rfc3339(ctx.now());

  /** Finishes a terminating Pod after its (shortened) grace period, with grace 0 like a kubelet. */
  async function terminate(pod: KubeObject, nodeName: string): Promise<number | undefined> {
    const seconds = pod.metadata.deletionGracePeriodSeconds ?? 0;
    if (seconds === 0) return undefined; // already deleted with grace 0: only finalizers hold it
    const uid = pod.metadata.uid ?? '';
    const left =
      firstSeen(terminatingAt, uid) + Math.min(seconds * 1000, options.terminationGraceMs) - ctx.elapsed();
    if (left > 0) return left;
    try {
      await objects.delete(
        types.pods,
        namespaceOf(pod),
        nameOf(pod),
        { gracePeriodSeconds: 0, preconditions: { uid } },
        ctxFor(nodeName),
      );
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    return undefined;
  }

  /** Starts a bound Pending Pod after the start-up delay. */
  async function start(pod: KubeObject, node: KubeObject): Promise<number | undefined> {
    const uid = pod.metadata.uid ?? '';
    const left = firstSeen(boundAt, uid) + options.kubeletReadyDelayMs - ctx.elapsed();
    if (left > 0) return left;
    await writeStatus(
      ctx,
      types.pods,
      pod,
      runningStatus(pod, node, nextIp(), nowIso()),
      ctxFor(nameOf(node)),
    );
    runningAt.set(uid, ctx.elapsed());
    return runsToCompletion(pod) ? runDuration(pod) : undefined;
  }

  /** Keeps Ready in line with readiness gates; ends run-to-completion Pods after their run time. */
  async function run(pod: KubeObject, node: KubeObject): Promise<number | undefined> {
    let current = pod;
    if (arr(podSpec(pod).readinessGates).length > 0) {
      const conditions = arr(obj(pod.status).conditions);
      const ready = readiness(pod, conditions);
      const next = ready.ready
        ? withCondition(conditions, 'Ready', 'True', nowIso())
        : withCondition(conditions, 'Ready', 'False', nowIso(), 'ReadinessGatesNotReady', ready.message);
      if (next !== conditions)
        current = await writeStatus(
          ctx,
          types.pods,
          pod,
          { ...obj(pod.status), conditions: next },
          ctxFor(nameOf(node)),
        );
    }
    if (!runsToCompletion(pod)) return undefined;
    const left = firstSeen(runningAt, pod.metadata.uid ?? '') + runDuration(pod) - ctx.elapsed();
    if (left > 0) return left;
    const exit = annotationInt(pod, EXIT_CODE_ANNOTATION) ?? 0;
    await writeStatus(ctx, types.pods, current, exitedStatus(current, exit, nowIso()), ctxFor(nameOf(node)));
    return undefined;
  }

  async function reconcile(key: string): Promise<number | undefined> {
    const { namespace, name } = splitKey(key);
    const pod = getObject(store, TYPE_KEYS.pods, namespace, name);
    const nodeName = pod ? nodeNameOf(pod) : undefined;
    if (!pod || !nodeName) return undefined;
    // Terminating Pods are finished even when their Node is gone (what the Pod GC would do).
    if (pod.metadata.deletionTimestamp) return terminate(pod, nodeName);
    const node = getObject(store, TYPE_KEYS.nodes, '', nodeName);
    if (!node) return undefined; // no kubelet runs there
    const phase = podPhase(pod);
    if (phase === 'Pending') return start(pod, node);
    if (phase === 'Running') return run(pod, node);
    return undefined;
  }

  return {
    name: 'kubelet',
    keysFor(change: Change): string[] {
      if (change.typeKey === TYPE_KEYS.pods) {
        const uid = change.object.metadata.uid;
        if (change.type === 'DELETED') {
          if (uid) {
            boundAt.delete(uid);
            runningAt.delete(uid);
            terminatingAt.delete(uid);
          }
          return [];
        }
        return nodeNameOf(change.object) ? [keyOf(change.object)] : [];
      }
      if (change.typeKey === TYPE_KEYS.nodes && change.type === 'ADDED') {
        const node = nameOf(change.object);
        return store
          .list(TYPE_KEYS.pods)
          .filter((p) => nodeNameOf(p) === node)
          .map(keyOf);
      }
      return [];
    },
    initialKeys: () =>
      store
        .list(TYPE_KEYS.pods)
        .filter((p) => nodeNameOf(p) !== undefined)
        .map(keyOf),
    reconcile,
  };
}
