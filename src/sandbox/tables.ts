// Server-side Tables (meta.k8s.io/v1 Table), what `kubectl get` prints. Built-in kinds follow
// pkg/printers/internalversion/printers.go, which kube-apiserver always runs with Wide: true (kubectl hides
// priority>0 columns itself); custom resources follow apiextensions' tableconvertor; kinds without a
// printer (Role, ClusterRole, CRD, ...) get apiserver's default convertor (registry/rest/table.go).
// Objects are the stored JSON, so every field is read defensively.
import { JSONPath } from 'jsonpath-plus';
import { badRequest, type JsonObject, type JsonValue, type KubeObject } from './types.ts';

export interface PrinterColumn {
  name: string;
  type: string;
  format?: string;
  description?: string;
  priority?: number;
  jsonPath: string;
}

export type IncludeObject = 'None' | 'Metadata' | 'Object';

export interface BuildTableOptions {
  includeObject?: IncludeObject;
  /** Epoch milliseconds; ages are computed against it. */
  now: number;
  /** Present (even empty) for a custom resource: its version's additionalPrinterColumns. */
  printerColumns?: PrinterColumn[];
  resourceVersion: string;
  continueToken?: string;
}

type Cell = string | number | boolean | null;

interface ColumnDefinition {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

interface RowCondition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

interface Printer {
  columns: ColumnDefinition[];
  cells(obj: KubeObject, now: number): Cell[];
  conditions?(obj: KubeObject): RowCondition[] | undefined;
}

// --- HumanDuration --------------------------------------------------------------------------------

/** k8s.io/apimachinery/pkg/util/duration.HumanDuration: ~2-3 significant figures, e.g. 5s, 3m2s, 2d. */
export function humanDuration(ms: number): string {
  // Go truncates toward zero; up to 2s in the future still reads as now (clock skew).
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.trunc(ms / 60_000);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.trunc(ms / 3_600_000);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    const days = Math.trunc(hours / 24);
    return h === 0 ? `${days}d` : `${days}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.trunc(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const years = Math.trunc(hours / 24 / 365);
    const dy = Math.trunc(hours / 24) % 365;
    return dy === 0 ? `${years}y` : `${years}y${dy}d`;
  }
  return `${Math.trunc(hours / 24 / 365)}y`;
}

// --- field access ---------------------------------------------------------------------------------

function get(obj: unknown, path: string): unknown {
  let cur = obj;
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object' || Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const int = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? Math.trunc(v) : 0);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const count = (v: unknown): number =>
  v !== null && typeof v === 'object' ? Object.keys(v as Record<string, unknown>).length : 0;
const stringMap = (v: unknown): Record<string, string> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, string>) : {};

/** A metav1.Time as epoch ms; undefined for the zero time (absent or unparsable). */
function timeOf(v: unknown): number | undefined {
  if (typeof v !== 'string' || v === '') return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
}

/** translateTimestampSince: `<unknown>` for the zero time. */
function since(v: unknown, now: number): string {
  const t = timeOf(v);
  return t === undefined ? '<unknown>' : humanDuration(now - t);
}

const age = (obj: KubeObject, now: number): string => since(obj.metadata.creationTimestamp, now);

/** labels.FormatLabels: sorted k=v pairs, `<none>` when empty. */
function formatLabels(v: unknown): string {
  const labels = stringMap(v);
  const keys = Object.keys(labels).sort();
  return keys.length === 0 ? '<none>' : keys.map((k) => `${k}=${labels[k]}`).join(',');
}

/**
 * metav1.LabelSelectorAsSelector(sel).String(): requirements sorted by key, `k=v`, `k in (a,b)`, `k`,
 * `!k`. A nil or empty selector prints as the empty string; an invalid one throws.
 */
function labelSelectorString(v: unknown): string {
  if (v === null || typeof v !== 'object') return '';
  const sel = v as { matchLabels?: unknown; matchExpressions?: unknown };
  const reqs: { key: string; text: string }[] = [];
  for (const [key, value] of Object.entries(stringMap(sel.matchLabels)))
    reqs.push({ key, text: `${key}=${value}` });
  for (const e of list(sel.matchExpressions)) {
    const expr = e as { key?: unknown; operator?: unknown; values?: unknown };
    const key = str(expr.key);
    const values = list(expr.values).map(str);
    const valueText = values.length === 1 ? values[0] : [...values].sort().join(',');
    switch (expr.operator) {
      case 'In':
      case 'NotIn':
        if (values.length === 0) throw new Error('values set can not be empty');
        reqs.push({ key, text: `${key} ${expr.operator === 'In' ? 'in' : 'notin'} (${valueText})` });
        break;
      case 'Exists':
        reqs.push({ key, text: key });
        break;
      case 'DoesNotExist':
        reqs.push({ key, text: `!${key}` });
        break;
      default:
        throw new Error(`"${String(expr.operator)}" is not a valid label selector operator`);
    }
  }
  return reqs
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .map((r) => r.text)
    .join(',');
}

/** metav1.FormatLabelSelector: `<none>` for an empty selector, `<error>` for an invalid one. */
function formatLabelSelector(v: unknown): string {
  try {
    return labelSelectorString(v) || '<none>';
  } catch {
    return '<error>';
  }
}

/** layoutContainerCells: names and images, comma-joined. */
function containerCells(containers: unknown): [string, string] {
  const cs = list(containers).map((c) => c as { name?: unknown; image?: unknown });
  return [cs.map((c) => str(c.name)).join(','), cs.map((c) => str(c.image)).join(',')];
}

// --- column definitions ---------------------------------------------------------------------------

// Descriptions are the SwaggerDoc() texts the printers reference (metav1.ObjectMeta, core/v1, ...).
const NAME_DESC =
  'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names';
const AGE_DESC =
  'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata';
const CONTAINERS_DESC = 'Names of each container in the template.';
const IMAGES_DESC = 'Images referenced by each container in the template.';
const LABEL_SELECTORS_INFO =
  'More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors';
const NODE_ADDRESSES_DESC =
  "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
const ROLE_BINDING_SUBJECTS = (what: string): ColumnDefinition[] => [
  col('Users', 'string', `Users in the ${what}`, 1),
  col('Groups', 'string', `Groups in the ${what}`, 1),
  col('ServiceAccounts', 'string', `ServiceAccounts in the ${what}`, 1),
];

function col(name: string, type: string, description: string, priority = 0, format = ''): ColumnDefinition {
  return { name, type, format, description, priority };
}

const nameCol = (): ColumnDefinition => col('Name', 'string', NAME_DESC, 0, 'name');
const ageCol = (): ColumnDefinition => col('Age', 'string', AGE_DESC);

// --- built-in printers ----------------------------------------------------------------------------

interface ContainerStatus {
  name?: string;
  ready?: boolean;
  started?: boolean;
  restartCount?: number;
  state?: { waiting?: { reason?: string }; running?: object; terminated?: Terminated };
  lastState?: { terminated?: Terminated };
}
interface Terminated {
  reason?: string;
  exitCode?: number;
  signal?: number;
  finishedAt?: string;
}
interface Condition {
  type?: string;
  status?: string;
  reason?: string;
}

const conditionsOf = (obj: KubeObject, path = 'status.conditions'): Condition[] =>
  list(get(obj, path)).map((c) => c as Condition);

function podCells(pod: KubeObject, now: number): Cell[] {
  const spec = (pod.spec ?? {}) as Record<string, unknown>;
  const status = (pod.status ?? {}) as Record<string, unknown>;
  const conditions = conditionsOf(pod);
  let restarts = 0;
  let restartableInitRestarts = 0;
  let totalContainers = list(spec.containers).length;
  let readyContainers = 0;
  let lastRestart: number | undefined;
  let lastRestartableInitRestart: number | undefined;
  const later = (a: number | undefined, b: unknown): number | undefined => {
    const t = timeOf(b);
    return t !== undefined && (a === undefined || a < t) ? t : a;
  };

  const phase = str(status.phase);
  let reason = str(status.reason) || phase;
  // The scheduling gate is read from the PodScheduled condition the API server sets, as kube does.
  for (const c of conditions)
    if (c.type === 'PodScheduled' && c.reason === 'SchedulingGated') reason = 'SchedulingGated';

  const initSpecs = new Map<string, { restartPolicy?: unknown }>();
  for (const c of list(spec.initContainers)) {
    const init = c as { name?: unknown; restartPolicy?: unknown };
    initSpecs.set(str(init.name), init);
    if (init.restartPolicy === 'Always') totalContainers++;
  }
  const restartable = (name: string | undefined) => initSpecs.get(name ?? '')?.restartPolicy === 'Always';

  let initializing = false;
  const initStatuses = list(status.initContainerStatuses).map((c) => c as ContainerStatus);
  for (const [i, container] of initStatuses.entries()) {
    restarts += int(container.restartCount);
    lastRestart = later(lastRestart, container.lastState?.terminated?.finishedAt);
    if (restartable(container.name)) {
      restartableInitRestarts += int(container.restartCount);
      lastRestartableInitRestart = later(
        lastRestartableInitRestart,
        container.lastState?.terminated?.finishedAt,
      );
    }
    const terminated = container.state?.terminated;
    const waiting = container.state?.waiting;
    if (terminated && int(terminated.exitCode) === 0) continue;
    if (restartable(container.name) && container.started === true) {
      if (container.ready) readyContainers++;
      continue;
    }
    if (terminated) {
      if (!terminated.reason) {
        reason =
          int(terminated.signal) !== 0
            ? `Init:Signal:${int(terminated.signal)}`
            : `Init:ExitCode:${int(terminated.exitCode)}`;
      } else {
        reason = `Init:${terminated.reason}`;
      }
    } else if (waiting?.reason && waiting.reason !== 'PodInitializing') {
      reason = `Init:${waiting.reason}`;
    } else {
      reason = `Init:${i}/${list(spec.initContainers).length}`;
    }
    initializing = true;
    break;
  }

  const initializedTrue = conditions.find((c) => c.type === 'Initialized')?.status === 'True';
  if (!initializing || initializedTrue) {
    restarts = restartableInitRestarts;
    lastRestart = lastRestartableInitRestart;
    let hasRunning = false;
    const statuses = list(status.containerStatuses).map((c) => c as ContainerStatus);
    for (let i = statuses.length - 1; i >= 0; i--) {
      const container = statuses[i] as ContainerStatus;
      restarts += int(container.restartCount);
      lastRestart = later(lastRestart, container.lastState?.terminated?.finishedAt);
      const terminated = container.state?.terminated;
      if (container.state?.waiting?.reason) reason = container.state.waiting.reason;
      else if (terminated?.reason) reason = terminated.reason;
      else if (terminated) {
        reason =
          int(terminated.signal) !== 0
            ? `Signal:${int(terminated.signal)}`
            : `ExitCode:${int(terminated.exitCode)}`;
      } else if (container.ready && container.state?.running) {
        hasRunning = true;
        readyContainers++;
      }
    }
    // A Completed container next to a still-running one does not make the Pod Completed.
    if (reason === 'Completed' && hasRunning) {
      const podReady = conditions.some((c) => c.type === 'Ready' && c.status === 'True');
      reason = podReady ? 'Running' : 'NotReady';
    }
  }

  const deleting = pod.metadata.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null;
  if (deleting && status.reason === 'NodeLost') reason = 'Unknown';
  else if (deleting && phase !== 'Succeeded' && phase !== 'Failed') reason = 'Terminating';

  const restartsText =
    restarts !== 0 && lastRestart !== undefined
      ? `${restarts} (${humanDuration(now - lastRestart)} ago)`
      : String(restarts);

  const podIPs = list(status.podIPs).map((p) => p as { ip?: unknown });
  // The API server keeps podIP and podIPs[0] in step; fall back to podIP for objects stored without podIPs.
  const podIP = str(podIPs[0]?.ip) || str(status.podIP) || '<none>';
  const gates = list(spec.readinessGates).map((g) => str((g as { conditionType?: unknown }).conditionType));
  let readinessGates = '<none>';
  if (gates.length > 0) {
    const trueCount = gates.filter((t) => conditions.find((c) => c.type === t)?.status === 'True').length;
    readinessGates = `${trueCount}/${gates.length}`;
  }
  return [
    pod.metadata.name ?? '',
    `${readyContainers}/${totalContainers}`,
    reason,
    restartsText,
    age(pod, now),
    podIP,
    str(spec.nodeName) || '<none>',
    str(status.nominatedNodeName) || '<none>',
    readinessGates,
  ];
}

const podPrinter: Printer = {
  columns: [
    nameCol(),
    col('Ready', 'string', 'The aggregate readiness state of this pod for accepting traffic.'),
    col('Status', 'string', 'The aggregate status of the containers in this pod.'),
    col(
      'Restarts',
      'string',
      'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.',
    ),
    ageCol(),
    col(
      'IP',
      'string',
      'podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.',
      1,
    ),
    col(
      'Node',
      'string',
      'NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename',
      1,
    ),
    col(
      'Nominated Node',
      'string',
      'nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.',
      1,
    ),
    col(
      'Readiness Gates',
      'string',
      'If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to "True" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates',
      1,
    ),
  ],
  cells: podCells,
  conditions(pod) {
    const phase = get(pod, 'status.phase');
    if (phase === 'Succeeded') {
      return [
        {
          type: 'Completed',
          status: 'True',
          reason: 'Succeeded',
          message: 'The pod has completed successfully.',
        },
      ];
    }
    if (phase === 'Failed')
      return [{ type: 'Completed', status: 'True', reason: 'Failed', message: 'The pod failed.' }];
    return undefined;
  },
};

function nodeRoles(node: KubeObject): string {
  const roles = new Set<string>();
  for (const [k, v] of Object.entries(node.metadata.labels ?? {})) {
    if (k.startsWith('node-role.kubernetes.io/')) {
      const role = k.slice('node-role.kubernetes.io/'.length);
      if (role) roles.add(role);
    } else if (k === 'kubernetes.io/role' && v !== '') roles.add(v);
  }
  return [...roles].sort().join(',') || '<none>';
}

function nodeAddress(node: KubeObject, type: string): string {
  const found = list(get(node, 'status.addresses'))
    .map((a) => a as { type?: unknown; address?: unknown })
    .find((a) => a.type === type);
  return found ? str(found.address) : '<none>';
}

const nodePrinter: Printer = {
  columns: [
    nameCol(),
    col('Status', 'string', 'The status of the node'),
    col('Roles', 'string', 'The roles of the node'),
    ageCol(),
    col('Version', 'string', 'Kubelet Version reported by the node.'),
    col('Internal-IP', 'string', NODE_ADDRESSES_DESC, 1),
    col('External-IP', 'string', NODE_ADDRESSES_DESC, 1),
    col(
      'OS-Image',
      'string',
      'OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).',
      1,
    ),
    col(
      'Kernel-Version',
      'string',
      "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
      1,
    ),
    col(
      'Container-Runtime',
      'string',
      'ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).',
      1,
    ),
  ],
  cells(node, now) {
    // Only the Ready condition is shown; the last one of that type wins, as with the Go map.
    const ready = conditionsOf(node)
      .filter((c) => c.type === 'Ready')
      .at(-1);
    const status: string[] = ready ? [ready.status === 'True' ? 'Ready' : 'NotReady'] : ['Unknown'];
    if (get(node, 'spec.unschedulable') === true) status.push('SchedulingDisabled');
    const info = (get(node, 'status.nodeInfo') ?? {}) as Record<string, unknown>;
    return [
      node.metadata.name ?? '',
      status.join(','),
      nodeRoles(node),
      age(node, now),
      str(info.kubeletVersion),
      nodeAddress(node, 'InternalIP'),
      nodeAddress(node, 'ExternalIP'),
      str(info.osImage) || '<unknown>',
      str(info.kernelVersion) || '<unknown>',
      str(info.containerRuntimeVersion) || '<unknown>',
    ];
  },
};

const namespacePrinter: Printer = {
  columns: [nameCol(), col('Status', 'string', 'The status of the namespace'), ageCol()],
  cells: (ns, now) => [ns.metadata.name ?? '', str(get(ns, 'status.phase')), age(ns, now)],
};

/** spec.replicas as the API server defaults it (1 when unset). */
const replicas = (obj: KubeObject): number => {
  const v = get(obj, 'spec.replicas');
  return typeof v === 'number' ? Math.trunc(v) : 1;
};

const deploymentPrinter: Printer = {
  columns: [
    nameCol(),
    col('Ready', 'string', 'Number of the pod with ready state'),
    col(
      'Up-to-date',
      'string',
      'Total number of non-terminated pods targeted by this deployment that have the desired template spec.',
    ),
    col(
      'Available',
      'string',
      'Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.',
    ),
    ageCol(),
    col('Containers', 'string', CONTAINERS_DESC, 1),
    col('Images', 'string', IMAGES_DESC, 1),
    col(
      'Selector',
      'string',
      'Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.',
      1,
    ),
  ],
  cells(d, now) {
    const [names, images] = containerCells(get(d, 'spec.template.spec.containers'));
    let selector: string;
    try {
      selector = labelSelectorString(get(d, 'spec.selector'));
    } catch {
      selector = '<invalid>';
    }
    return [
      d.metadata.name ?? '',
      `${int(get(d, 'status.readyReplicas'))}/${replicas(d)}`,
      int(get(d, 'status.updatedReplicas')),
      int(get(d, 'status.availableReplicas')),
      age(d, now),
      names,
      images,
      selector,
    ];
  },
};

const replicaSetPrinter: Printer = {
  columns: [
    nameCol(),
    col(
      'Desired',
      'integer',
      'Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller',
    ),
    col(
      'Current',
      'integer',
      'Replicas is the most recently oberved number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller',
    ),
    col('Ready', 'integer', 'The number of ready replicas for this replica set.'),
    ageCol(),
    col('Containers', 'string', CONTAINERS_DESC, 1),
    col('Images', 'string', IMAGES_DESC, 1),
    col(
      'Selector',
      'string',
      `Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. ${LABEL_SELECTORS_INFO}`,
      1,
    ),
  ],
  cells(rs, now) {
    const [names, images] = containerCells(get(rs, 'spec.template.spec.containers'));
    return [
      rs.metadata.name ?? '',
      replicas(rs),
      int(get(rs, 'status.replicas')),
      int(get(rs, 'status.readyReplicas')),
      age(rs, now),
      names,
      images,
      formatLabelSelector(get(rs, 'spec.selector')),
    ];
  },
};

const statefulSetPrinter: Printer = {
  columns: [
    nameCol(),
    col('Ready', 'string', 'Number of the pod with ready state'),
    ageCol(),
    col('Containers', 'string', CONTAINERS_DESC, 1),
    col('Images', 'string', IMAGES_DESC, 1),
  ],
  cells(sts, now) {
    const [names, images] = containerCells(get(sts, 'spec.template.spec.containers'));
    return [
      sts.metadata.name ?? '',
      `${int(get(sts, 'status.readyReplicas'))}/${replicas(sts)}`,
      age(sts, now),
      names,
      images,
    ];
  },
};

const daemonSetPrinter: Printer = {
  columns: [
    nameCol(),
    col(
      'Desired',
      'integer',
      'The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/',
    ),
    col(
      'Current',
      'integer',
      'The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/',
    ),
    col(
      'Ready',
      'integer',
      'The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.',
    ),
    col('Up-to-date', 'integer', 'The total number of nodes that are running updated daemon pod'),
    col(
      'Available',
      'integer',
      'The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)',
    ),
    col(
      'Node Selector',
      'string',
      "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
    ),
    ageCol(),
    col('Containers', 'string', CONTAINERS_DESC, 1),
    col('Images', 'string', IMAGES_DESC, 1),
    col(
      'Selector',
      'string',
      `A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. ${LABEL_SELECTORS_INFO}`,
      1,
    ),
  ],
  cells(ds, now) {
    const [names, images] = containerCells(get(ds, 'spec.template.spec.containers'));
    return [
      ds.metadata.name ?? '',
      int(get(ds, 'status.desiredNumberScheduled')),
      int(get(ds, 'status.currentNumberScheduled')),
      int(get(ds, 'status.numberReady')),
      int(get(ds, 'status.updatedNumberScheduled')),
      int(get(ds, 'status.numberAvailable')),
      formatLabels(get(ds, 'spec.template.spec.nodeSelector')),
      age(ds, now),
      names,
      images,
      formatLabelSelector(get(ds, 'spec.selector')),
    ];
  },
};

const JOB_SELECTOR_DESC = `A label query over pods that should match the pod count. Normally, the system sets this field for you. ${LABEL_SELECTORS_INFO}`;

/** The first condition of the type decides, as hasJobCondition does. */
function hasCondition(obj: KubeObject, type: string): boolean {
  const found = conditionsOf(obj).find((c) => c.type === type);
  return found?.status === 'True';
}

const jobPrinter: Printer = {
  columns: [
    nameCol(),
    col('Status', 'string', 'Status of the job.'),
    col(
      'Completions',
      'string',
      'The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.',
    ),
    col('Duration', 'string', 'Time required to complete the job.'),
    ageCol(),
    col('Containers', 'string', CONTAINERS_DESC, 1),
    col('Images', 'string', IMAGES_DESC, 1),
    col('Selector', 'string', JOB_SELECTOR_DESC, 1),
  ],
  cells(job, now) {
    const succeeded = int(get(job, 'status.succeeded'));
    const completionsSpec = get(job, 'spec.completions');
    let completions: string;
    if (typeof completionsSpec === 'number') completions = `${succeeded}/${int(completionsSpec)}`;
    else {
      const parallelism = int(get(job, 'spec.parallelism'));
      completions = parallelism > 1 ? `${succeeded}/1 of ${parallelism}` : `${succeeded}/1`;
    }
    const start = timeOf(get(job, 'status.startTime'));
    const completion = timeOf(get(job, 'status.completionTime'));
    let duration = '';
    if (start !== undefined) duration = humanDuration((completion ?? now) - start);
    let status = 'Running';
    if (hasCondition(job, 'Complete')) status = 'Complete';
    else if (hasCondition(job, 'Failed')) status = 'Failed';
    else if (job.metadata.deletionTimestamp) status = 'Terminating';
    else if (hasCondition(job, 'Suspended')) status = 'Suspended';
    else if (hasCondition(job, 'FailureTarget')) status = 'FailureTarget';
    const [names, images] = containerCells(get(job, 'spec.template.spec.containers'));
    return [
      job.metadata.name ?? '',
      status,
      completions,
      duration,
      age(job, now),
      names,
      images,
      formatLabelSelector(get(job, 'spec.selector')),
    ];
  },
};

const cronJobPrinter: Printer = {
  columns: [
    nameCol(),
    col('Schedule', 'string', 'The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.'),
    col(
      'Timezone',
      'string',
      'The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones',
    ),
    col(
      'Suspend',
      'boolean',
      'This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.',
    ),
    col('Active', 'integer', 'A list of pointers to currently running jobs.'),
    col('Last Schedule', 'string', 'Information when was the last time the job was successfully scheduled.'),
    ageCol(),
    col('Containers', 'string', CONTAINERS_DESC, 1),
    col('Images', 'string', IMAGES_DESC, 1),
    col('Selector', 'string', JOB_SELECTOR_DESC, 1),
  ],
  cells(cj, now) {
    const last = get(cj, 'status.lastScheduleTime');
    const timeZone = get(cj, 'spec.timeZone');
    // The API server defaults spec.suspend to false; printBoolPtr shows <unset> only for nil.
    const suspend = get(cj, 'spec.suspend') ?? false;
    const [names, images] = containerCells(get(cj, 'spec.jobTemplate.spec.template.spec.containers'));
    return [
      cj.metadata.name ?? '',
      str(get(cj, 'spec.schedule')),
      typeof timeZone === 'string' ? timeZone : '<none>',
      typeof suspend === 'boolean' ? (suspend ? 'True' : 'False') : '<unset>',
      list(get(cj, 'status.active')).length,
      last === undefined || last === null ? '<none>' : since(last, now),
      age(cj, now),
      names,
      images,
      formatLabelSelector(get(cj, 'spec.jobTemplate.spec.selector')),
    ];
  },
};

function serviceExternalIP(svc: KubeObject, type: string): string {
  const externalIPs = list(get(svc, 'spec.externalIPs')).map(str);
  switch (type) {
    case 'ClusterIP':
    case 'NodePort':
      return externalIPs.length > 0 ? externalIPs.join(',') : '<none>';
    case 'LoadBalancer': {
      const ingress = new Set<string>();
      for (const i of list(get(svc, 'status.loadBalancer.ingress'))) {
        const entry = i as { ip?: unknown; hostname?: unknown };
        if (str(entry.ip)) ingress.add(str(entry.ip));
        else if (str(entry.hostname)) ingress.add(str(entry.hostname));
      }
      const lb = [...ingress].sort();
      if (externalIPs.length > 0) return [...lb, ...externalIPs].join(',');
      return lb.length > 0 ? lb.join(',') : '<pending>';
    }
    case 'ExternalName':
      return str(get(svc, 'spec.externalName'));
    default:
      return '<unknown>';
  }
}

const servicePrinter: Printer = {
  columns: [
    nameCol(),
    col(
      'Type',
      'string',
      'type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. "ClusterIP" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is "None", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. "NodePort" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. "LoadBalancer" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. "ExternalName" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types',
    ),
    col(
      'Cluster-IP',
      'string',
      'clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are "None", empty string (""), or a valid IP address. Setting this to "None" makes a "headless service" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies',
    ),
    col(
      'External-IP',
      'string',
      'externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.',
    ),
    col(
      'Port(s)',
      'string',
      'The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies',
    ),
    ageCol(),
    col(
      'Selector',
      'string',
      'Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/',
      1,
    ),
  ],
  cells(svc, now) {
    // type and protocol as the API server defaults them (ClusterIP, TCP); clusterIPs mirrors clusterIP.
    const type = str(get(svc, 'spec.type')) || 'ClusterIP';
    const clusterIPs = list(get(svc, 'spec.clusterIPs')).map(str);
    const clusterIP = clusterIPs[0] || str(get(svc, 'spec.clusterIP')) || '<none>';
    const ports = list(get(svc, 'spec.ports'))
      .map((p) => p as { port?: unknown; nodePort?: unknown; protocol?: unknown })
      .map((p) => {
        const protocol = str(p.protocol) || 'TCP';
        return int(p.nodePort) > 0
          ? `${int(p.port)}:${int(p.nodePort)}/${protocol}`
          : `${int(p.port)}/${protocol}`;
      })
      .join(',');
    return [
      svc.metadata.name ?? '',
      type,
      clusterIP,
      serviceExternalIP(svc, type),
      ports || '<none>',
      age(svc, now),
      formatLabels(get(svc, 'spec.selector')),
    ];
  },
};

const configMapPrinter: Printer = {
  columns: [
    nameCol(),
    col(
      'Data',
      'string',
      "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
    ),
    ageCol(),
  ],
  cells: (cm, now) => [cm.metadata.name ?? '', count(cm.data) + count(cm.binaryData), age(cm, now)],
};

const secretPrinter: Printer = {
  columns: [
    nameCol(),
    col(
      'Type',
      'string',
      'Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types',
    ),
    col(
      'Data',
      'string',
      "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
    ),
    ageCol(),
  ],
  // The API server defaults type to Opaque.
  cells: (s, now) => [s.metadata.name ?? '', str(s.type) || 'Opaque', count(s.data), age(s, now)],
};

const serviceAccountPrinter: Printer = {
  columns: [
    nameCol(),
    col(
      'Secrets',
      'string',
      'Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a "kubernetes.io/enforce-mountable-secrets" annotation set to "true". The "kubernetes.io/enforce-mountable-secrets" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret',
    ),
    ageCol(),
  ],
  cells: (sa, now) => [sa.metadata.name ?? '', list(sa.secrets).length, age(sa, now)],
};

const leasePrinter: Printer = {
  columns: [
    nameCol(),
    col(
      'Holder',
      'string',
      'holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.',
    ),
    ageCol(),
  ],
  cells: (l, now) => [l.metadata.name ?? '', str(get(l, 'spec.holderIdentity')), age(l, now)],
};

const webhookPrinter: Printer = {
  columns: [
    nameCol(),
    col('Webhooks', 'integer', 'Webhooks indicates the number of webhooks registered in this configuration'),
    ageCol(),
  ],
  cells: (w, now) => [w.metadata.name ?? '', list(w.webhooks).length, age(w, now)],
};

function bindingPrinter(what: string, roleRefDesc: string): Printer {
  return {
    columns: [nameCol(), col('Role', 'string', roleRefDesc), ageCol(), ...ROLE_BINDING_SUBJECTS(what)],
    cells(b, now) {
      const ref = (b.roleRef ?? {}) as Record<string, unknown>;
      const users: string[] = [];
      const groups: string[] = [];
      const sas: string[] = [];
      for (const s of list(b.subjects)) {
        const subject = s as { kind?: unknown; name?: unknown; namespace?: unknown };
        if (subject.kind === 'ServiceAccount') sas.push(`${str(subject.namespace)}/${str(subject.name)}`);
        else if (subject.kind === 'User') users.push(str(subject.name));
        else if (subject.kind === 'Group') groups.push(str(subject.name));
      }
      return [
        b.metadata.name ?? '',
        `${str(ref.kind)}/${str(ref.name)}`,
        age(b, now),
        users.join(', '),
        groups.join(', '),
        sas.join(', '),
      ];
    },
  };
}

/** Reads a core/v1 Event, or an events.k8s.io/v1 one through its field mapping to the internal type. */
function eventFields(e: KubeObject) {
  const v1 = (e.apiVersion ?? '').startsWith('events.k8s.io/');
  const pick = (core: string, events: string): unknown => get(e, v1 ? events : core);
  return {
    involvedObject: (pick('involvedObject', 'regarding') ?? {}) as {
      kind?: unknown;
      name?: unknown;
      fieldPath?: unknown;
    },
    message: str(pick('message', 'note')),
    source: (pick('source', 'deprecatedSource') ?? {}) as { component?: unknown; host?: unknown },
    firstTimestamp: pick('firstTimestamp', 'deprecatedFirstTimestamp'),
    lastTimestamp: pick('lastTimestamp', 'deprecatedLastTimestamp'),
    count: int(pick('count', 'deprecatedCount')),
  };
}

const eventPrinter: Printer = {
  columns: [
    col('Last Seen', 'string', 'The time at which the most recent occurrence of this event was recorded.'),
    col('Type', 'string', 'Type of this event (Normal, Warning), new types could be added in the future'),
    col(
      'Reason',
      'string',
      "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
    ),
    col('Object', 'string', 'The object that this event is about.'),
    col(
      'Subobject',
      'string',
      'If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: "spec.containers{name}" (where "name" refers to the name of the container that triggered the event) or if no container name is specified "spec.containers[2]" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.',
      1,
    ),
    col(
      'Source',
      'string',
      'The component reporting this event. Should be a short machine understandable string.',
      1,
    ),
    col('Message', 'string', 'A human-readable description of the status of this operation.'),
    col(
      'First Seen',
      'string',
      'The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)',
      1,
    ),
    col('Count', 'string', 'The number of times this event has occurred.', 1),
    col('Name', 'string', NAME_DESC, 1, 'name'),
  ],
  cells(e, now) {
    const f = eventFields(e);
    let first = since(f.firstTimestamp, now);
    if (timeOf(f.firstTimestamp) === undefined) first = since(e.eventTime, now);
    let last = timeOf(f.lastTimestamp) === undefined ? first : since(f.lastTimestamp, now);
    let n = f.count;
    const series = e.series as { count?: unknown; lastObservedTime?: unknown } | undefined | null;
    if (series) {
      last = since(series.lastObservedTime, now);
      n = int(series.count);
    } else if (n === 0) n = 1; // singleton events carry no count in the new API
    const kind = str(f.involvedObject.kind).toLowerCase();
    const target = str(f.involvedObject.name) ? `${kind}/${str(f.involvedObject.name)}` : kind;
    const component = str(f.source.component) || str(e.reportingController);
    const instance = str(f.source.host) || str(e.reportingInstance);
    return [
      last,
      str(e.type),
      str(e.reason),
      target,
      str(f.involvedObject.fieldPath),
      instance ? `${component}, ${instance}` : component,
      f.message.trim(),
      first,
      n,
      e.metadata.name ?? '',
    ];
  },
};

const BUILT_IN: Record<string, Printer> = {
  Pod: podPrinter,
  Node: nodePrinter,
  Namespace: namespacePrinter,
  Deployment: deploymentPrinter,
  ReplicaSet: replicaSetPrinter,
  StatefulSet: statefulSetPrinter,
  DaemonSet: daemonSetPrinter,
  Job: jobPrinter,
  CronJob: cronJobPrinter,
  Service: servicePrinter,
  ConfigMap: configMapPrinter,
  Secret: secretPrinter,
  ServiceAccount: serviceAccountPrinter,
  Event: eventPrinter,
  Lease: leasePrinter,
  MutatingWebhookConfiguration: webhookPrinter,
  ValidatingWebhookConfiguration: webhookPrinter,
  RoleBinding: bindingPrinter(
    'roleBinding',
    'RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.',
  ),
  ClusterRoleBinding: bindingPrinter(
    'clusterRoleBinding',
    'RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.',
  ),
};

/** apiserver's default convertor, used for kinds without a printer (Role, ClusterRole, CRD, ...). */
const defaultPrinter: Printer = {
  columns: [nameCol(), col('Created At', 'date', AGE_DESC)],
  cells: (obj) => {
    const t = timeOf(obj.metadata.creationTimestamp);
    // time.RFC3339 in UTC, whole seconds; the zero time for a missing timestamp.
    const created = t === undefined ? '0001-01-01T00:00:00Z' : `${new Date(t).toISOString().slice(0, 19)}Z`;
    return [obj.metadata.name ?? '', created];
  },
};

// --- custom resources -----------------------------------------------------------------------------

/**
 * The printer columns a CRD serves for one version: its additionalPrinterColumns, or the Age column
 * apiextensions serves when there are none (serveDefaultColumnsIfEmpty).
 */
export function crdPrinterColumns(crd: KubeObject, version: string): PrinterColumn[] {
  const versions = list(get(crd, 'spec.versions')).map(
    (v) => v as { name?: unknown; additionalPrinterColumns?: unknown },
  );
  const columns = list(versions.find((v) => v.name === version)?.additionalPrinterColumns);
  return withDefaultColumns(
    columns.map((c) => {
      const column = c as Record<string, unknown>;
      const out: PrinterColumn = {
        name: str(column.name),
        type: str(column.type),
        jsonPath: str(column.jsonPath),
      };
      if (typeof column.format === 'string') out.format = column.format;
      if (typeof column.description === 'string') out.description = column.description;
      if (typeof column.priority === 'number') out.priority = column.priority;
      return out;
    }),
  );
}

function withDefaultColumns(columns: PrinterColumn[]): PrinterColumn[] {
  if (columns.length > 0) return columns;
  return [{ name: 'Age', type: 'date', description: AGE_DESC, jsonPath: '.metadata.creationTimestamp' }];
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** Go's json.Marshal of decoded JSON: object keys sorted. */
function goJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(goJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${goJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** One additionalPrinterColumn cell, as tableconvertor's FindResults + PrintResults / cellForJSONValue. */
function customCell(obj: KubeObject, column: PrinterColumn, now: number): Cell {
  let value: unknown;
  try {
    const results = JSONPath({
      path: `$${column.jsonPath}`,
      json: obj as unknown as JsonObject,
      wrap: true,
    }) as unknown[];
    value = results[0];
  } catch {
    return null;
  }
  if (value === undefined || value === null) return null;
  switch (column.type) {
    case 'string':
      // jsonpath prints strings raw, scalars with fmt, maps and lists as JSON.
      if (typeof value === 'string') return value;
      return typeof value === 'object' ? goJson(value) : String(value);
    case 'integer':
      return typeof value === 'number' ? Math.trunc(value) : null;
    case 'number':
      return typeof value === 'number' ? value : null;
    case 'boolean':
      return typeof value === 'boolean' ? value : null;
    case 'date': {
      if (typeof value !== 'string') return null;
      if (!RFC3339.test(value)) return '<invalid>';
      return since(value, now);
    }
    default:
      return null;
  }
}

function customPrinter(columns: PrinterColumn[]): Printer {
  return {
    columns: [
      nameCol(),
      ...columns.map((c) =>
        col(
          c.name,
          c.type,
          c.description || `Custom resource definition column (in JSONPath format): ${c.jsonPath}`,
          c.priority ?? 0,
          c.format ?? '',
        ),
      ),
    ],
    cells: (obj, now) => [obj.metadata.name ?? '', ...columns.map((c) => customCell(obj, c, now))],
  };
}

// --- the Table --------------------------------------------------------------------------------------

/**
 * Builds a meta.k8s.io/v1 Table as the server returns for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.
 * includeObject: 'Metadata' (default; rows carry a meta.k8s.io/v1 PartialObjectMetadata), 'Object' or 'None'.
 * With `printerColumns` (even empty) the objects are custom resources; otherwise `kind` picks the built-in
 * printer, and kinds without one get Name + Created At like kube-apiserver's default convertor.
 */
export function buildTable(kind: string, objects: KubeObject[], opts: BuildTableOptions): JsonObject {
  const include: string = opts.includeObject ?? 'Metadata';
  if (include !== 'None' && include !== 'Metadata' && include !== 'Object') {
    throw badRequest(`unrecognized includeObject value: "${include}"`);
  }
  const printer =
    opts.printerColumns !== undefined
      ? customPrinter(withDefaultColumns(opts.printerColumns))
      : (BUILT_IN[kind] ?? defaultPrinter);

  const rows = objects.map((obj) => {
    const row: JsonObject = { cells: printer.cells(obj, opts.now) };
    const conditions = printer.conditions?.(obj);
    if (conditions) row.conditions = conditions as unknown as JsonValue;
    if (include === 'Object') row.object = obj as unknown as JsonObject;
    else if (include === 'Metadata') {
      row.object = {
        apiVersion: 'meta.k8s.io/v1',
        kind: 'PartialObjectMetadata',
        metadata: obj.metadata as unknown as JsonObject,
      };
    } else row.object = null;
    return row;
  });

  const metadata: JsonObject = {};
  if (opts.resourceVersion) metadata.resourceVersion = opts.resourceVersion;
  if (opts.continueToken) metadata.continue = opts.continueToken;
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata,
    columnDefinitions: printer.columns as unknown as JsonValue,
    // The default convertor never allocates its row slice, so an empty list serialises as null there.
    rows: rows.length === 0 && printer === defaultPrinter ? null : rows,
  };
}
