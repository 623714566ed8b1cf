// Per-type semantics of the built-in resources (kube-apiserver's "strategies"): defaults, what create and
// update reset, and the validations our operator and its tests depend on. Types without an entry get
// generic behaviour (subdomain names, metadata checks).
import { crdStrategy } from './crds.ts';
import { parseCron } from './simulator/cron.ts';
import { badRequest, type FieldCause, type KubeObject } from './types.ts';
import { forbiddenCause, immutableCause, invalidCause, type NameRule, requiredCause } from './validation.ts';

type Obj = Record<string, unknown>;

export interface Strategy {
  nameRule: NameRule;
  defaults?(obj: KubeObject): void;
  prepareForCreate?(obj: KubeObject, now: string): void;
  /** Called for writes to the main resource and to `status`; may fix up `next` from `old`. */
  prepareForUpdate?(next: KubeObject, old: KubeObject, subresource: string, now: string): void;
  validate?(obj: KubeObject): FieldCause[];
  validateUpdate?(next: KubeObject, old: KubeObject, subresource: string): FieldCause[];
  /** Rejects undecodable content with 400 like the API server's decoder (e.g. MicroTime precision). */
  decode?(obj: KubeObject): void;
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const obj = (v: unknown): Obj => (isObj(v) ? v : {});
const arr = (v: unknown): Obj[] => (Array.isArray(v) ? (v.filter(isObj) as Obj[]) : []);
const setDefault = (o: Obj, key: string, value: unknown): void => {
  if (o[key] === undefined) o[key] = value;
};
/** Equality as JSON sees it: key order does not matter and undefined members count as absent. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => deepEqual(v, bb[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao).filter((k) => ao[k] !== undefined);
  const bk = Object.keys(bo).filter((k) => bo[k] !== undefined);
  return ak.length === bk.length && ak.every((k) => deepEqual(ao[k], bo[k]));
}

function ensure(o: Obj, key: string): Obj {
  if (!isObj(o[key])) o[key] = {};
  return o[key] as Obj;
}

function defaultContainers(spec: Obj): void {
  for (const field of ['containers', 'initContainers']) {
    for (const c of arr(spec[field])) {
      setDefault(c, 'terminationMessagePath', '/dev/termination-log');
      setDefault(c, 'terminationMessagePolicy', 'File');
      const image = typeof c.image === 'string' ? c.image : '';
      const tag = image.includes('@') ? 'digest' : image.split('/').pop()?.split(':')[1];
      setDefault(c, 'imagePullPolicy', !tag || tag === 'latest' ? 'Always' : 'IfNotPresent');
      setDefault(c, 'resources', {});
      for (const p of arr(c.ports)) setDefault(p, 'protocol', 'TCP');
    }
  }
}

export function defaultPodSpec(spec: Obj): void {
  setDefault(spec, 'restartPolicy', 'Always');
  setDefault(spec, 'terminationGracePeriodSeconds', 30);
  setDefault(spec, 'dnsPolicy', 'ClusterFirst');
  setDefault(spec, 'securityContext', {});
  setDefault(spec, 'schedulerName', 'default-scheduler');
  defaultContainers(spec);
}

function podSpecErrors(spec: Obj, path: string): FieldCause[] {
  const causes: FieldCause[] = [];
  const containers = arr(spec.containers);
  if (containers.length === 0) causes.push(requiredCause(`${path}.containers`));
  const seen = new Set<string>();
  for (const [field, list] of [
    ['containers', containers],
    ['initContainers', arr(spec.initContainers)],
  ] as const) {
    list.forEach((c, i) => {
      const name = typeof c.name === 'string' ? c.name : '';
      if (!name) causes.push(requiredCause(`${path}.${field}[${i}].name`));
      else if (seen.has(name))
        causes.push({
          reason: 'FieldValueDuplicate',
          field: `${path}.${field}[${i}].name`,
          message: `Duplicate value: ${JSON.stringify(name)}`,
        });
      seen.add(name);
      if (!c.image) causes.push(requiredCause(`${path}.${field}[${i}].image`));
    });
  }
  const restart = spec.restartPolicy;
  if (restart !== undefined && !['Always', 'OnFailure', 'Never'].includes(String(restart))) {
    causes.push({
      reason: 'FieldValueNotSupported',
      field: `${path}.restartPolicy`,
      message: `Unsupported value: ${JSON.stringify(restart)}: supported values: "Always", "OnFailure", "Never"`,
    });
  }
  const gates = arr(spec.schedulingGates);
  const gateNames = new Set<string>();
  gates.forEach((g, i) => {
    const name = typeof g.name === 'string' ? g.name : '';
    if (!name) causes.push(requiredCause(`${path}.schedulingGates[${i}].name`));
    if (gateNames.has(name))
      causes.push({
        reason: 'FieldValueDuplicate',
        field: `${path}.schedulingGates[${i}].name`,
        message: `Duplicate value: ${JSON.stringify(name)}`,
      });
    gateNames.add(name);
  });
  return causes;
}

/** Pod spec fields that an update may change (validation.ValidatePodUpdate). */
function mutablePodSpecView(spec: Obj): Obj {
  const view = structuredClone(spec);
  for (const c of [...arr(view.containers), ...arr(view.initContainers)]) delete c.image;
  delete view.activeDeadlineSeconds;
  delete view.tolerations;
  delete view.terminationGracePeriodSeconds;
  delete view.schedulingGates;
  return view;
}

const podStrategy: Strategy = {
  nameRule: 'subdomain',
  defaults: (o) => defaultPodSpec(ensure(o, 'spec')),
  prepareForCreate(o, now) {
    const spec = obj(o.spec);
    const status: Obj = { phase: 'Pending', qosClass: qosClass(spec) };
    if (arr(spec.schedulingGates).length > 0) {
      status.conditions = [
        {
          type: 'PodScheduled',
          status: 'False',
          reason: 'SchedulingGated',
          message: 'Scheduling is blocked due to non-empty scheduling gates',
          lastProbeTime: null,
          lastTransitionTime: now,
        },
      ];
    }
    o.status = status;
  },
  prepareForUpdate(next, old, subresource) {
    if (subresource === 'status') next.spec = old.spec;
  },
  validate(o) {
    const spec = obj(o.spec);
    const causes = podSpecErrors(spec, 'spec');
    if (spec.nodeName && arr(spec.schedulingGates).length > 0) {
      causes.push(
        forbiddenCause('spec.nodeName', 'cannot be set until all schedulingGates have been cleared'),
      );
    }
    return causes;
  },
  validateUpdate(next, old, subresource) {
    if (subresource !== '') return [];
    const causes: FieldCause[] = [];
    const oldGates = new Set(arr(obj(old.spec).schedulingGates).map((g) => String(g.name)));
    for (const gate of arr(obj(next.spec).schedulingGates)) {
      if (!oldGates.has(String(gate.name))) {
        causes.push(
          forbiddenCause(
            'spec.schedulingGates',
            `only deletion is allowed, but found new scheduling gate '${String(gate.name)}'`,
          ),
        );
      }
    }
    if (!deepEqual(mutablePodSpecView(obj(next.spec)), mutablePodSpecView(obj(old.spec)))) {
      causes.push(
        forbiddenCause(
          'spec',
          'pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)',
        ),
      );
    }
    return causes;
  },
};

function qosClass(spec: Obj): string {
  const containers = arr(spec.containers);
  let any = false;
  let guaranteed = containers.length > 0;
  for (const c of containers) {
    const res = obj(c.resources);
    const limits = obj(res.limits);
    const requests = obj(res.requests);
    if (Object.keys(limits).length || Object.keys(requests).length) any = true;
    if (
      !limits.cpu ||
      !limits.memory ||
      (requests.cpu && requests.cpu !== limits.cpu) ||
      (requests.memory && requests.memory !== limits.memory)
    ) {
      guaranteed = false;
    }
  }
  return guaranteed ? 'Guaranteed' : any ? 'Burstable' : 'BestEffort';
}

function selectorMatchesTemplate(o: KubeObject): FieldCause[] {
  const spec = obj(o.spec);
  const selector = spec.selector;
  if (!isObj(selector)) return [requiredCause('spec.selector')];
  const template = obj(spec.template);
  const labels = obj(obj(template.metadata).labels) as Record<string, string>;
  const matchLabels = obj(selector.matchLabels) as Record<string, string>;
  const causes: FieldCause[] = [];
  if (Object.keys(matchLabels).length === 0 && arr(selector.matchExpressions).length === 0) {
    causes.push(invalidCause('spec.selector', selector, 'empty selector is invalid for deployment'));
  }
  for (const [k, v] of Object.entries(matchLabels)) {
    if (labels[k] !== v) {
      causes.push(
        invalidCause('spec.template.metadata.labels', labels, '`selector` does not match template `labels`'),
      );
      break;
    }
  }
  return causes;
}

function workloadStrategy(kind: string): Strategy {
  return {
    nameRule: 'subdomain',
    defaults(o) {
      const spec = ensure(o, 'spec');
      if (kind !== 'DaemonSet') setDefault(spec, 'replicas', 1);
      setDefault(spec, 'revisionHistoryLimit', 10);
      if (kind === 'Deployment') {
        setDefault(spec, 'strategy', {
          type: 'RollingUpdate',
          rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%' },
        });
        setDefault(spec, 'progressDeadlineSeconds', 600);
      }
      if (kind === 'StatefulSet') {
        setDefault(spec, 'podManagementPolicy', 'OrderedReady');
        setDefault(spec, 'updateStrategy', { type: 'RollingUpdate', rollingUpdate: { partition: 0 } });
        setDefault(spec, 'persistentVolumeClaimRetentionPolicy', {
          whenDeleted: 'Retain',
          whenScaled: 'Retain',
        });
      }
      if (kind === 'DaemonSet')
        setDefault(spec, 'updateStrategy', {
          type: 'RollingUpdate',
          rollingUpdate: { maxUnavailable: 1, maxSurge: 0 },
        });
      if (kind === 'ReplicaSet') delete spec.revisionHistoryLimit;
      defaultPodSpec(ensure(ensure(spec, 'template'), 'spec'));
    },
    prepareForCreate(o) {
      o.status = {};
    },
    prepareForUpdate(next, old, subresource) {
      if (subresource === 'status') next.spec = old.spec;
    },
    validate(o) {
      const spec = obj(o.spec);
      const causes = selectorMatchesTemplate(o);
      if (typeof spec.replicas === 'number' && spec.replicas < 0) {
        causes.push(invalidCause('spec.replicas', spec.replicas, 'must be greater than or equal to 0'));
      }
      causes.push(...podSpecErrors(obj(obj(spec.template).spec), 'spec.template.spec'));
      return causes;
    },
    validateUpdate(next, old, subresource) {
      if (subresource !== '') return [];
      const selector = obj(next.spec).selector;
      return deepEqual(selector, obj(old.spec).selector) ? [] : [immutableCause('spec.selector', selector)];
    },
  };
}

const jobStrategy: Strategy = {
  nameRule: 'subdomain',
  defaults(o) {
    const spec = ensure(o, 'spec');
    setDefault(spec, 'parallelism', 1);
    setDefault(spec, 'completions', 1);
    setDefault(spec, 'backoffLimit', 6);
    setDefault(spec, 'completionMode', 'NonIndexed');
    setDefault(spec, 'suspend', false);
    setDefault(spec, 'podReplacementPolicy', 'TerminatingOrFailed');
    defaultPodSpec(ensure(ensure(spec, 'template'), 'spec'));
  },
  prepareForCreate(o) {
    // The API server generates the selector and labels of a Job from its UID (manualSelector unset).
    const spec = ensure(o, 'spec');
    const uid = o.metadata.uid ?? '';
    const name = o.metadata.name ?? '';
    if (!spec.manualSelector) {
      spec.selector = { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } };
      const meta = ensure(ensure(spec, 'template'), 'metadata');
      meta.labels = {
        ...obj(meta.labels),
        'batch.kubernetes.io/controller-uid': uid,
        'batch.kubernetes.io/job-name': name,
        'controller-uid': uid,
        'job-name': name,
      };
    }
    o.status = {};
  },
  prepareForUpdate(next, old, subresource) {
    if (subresource === 'status') next.spec = old.spec;
  },
  validate(o) {
    const spec = obj(o.spec);
    const podSpec = obj(obj(spec.template).spec);
    const causes = podSpecErrors(podSpec, 'spec.template.spec');
    if (podSpec.restartPolicy !== 'Never' && podSpec.restartPolicy !== 'OnFailure') {
      causes.push({
        reason: 'FieldValueNotSupported',
        field: 'spec.template.spec.restartPolicy',
        message: `Unsupported value: ${JSON.stringify(podSpec.restartPolicy)}: supported values: "OnFailure", "Never"`,
      });
    }
    return causes;
  },
  validateUpdate(next, old, subresource) {
    if (subresource !== '') return [];
    const causes: FieldCause[] = [];
    if (!deepEqual(obj(next.spec).selector, obj(old.spec).selector))
      causes.push(immutableCause('spec.selector', obj(next.spec).selector));
    if (!deepEqual(obj(next.spec).template, obj(old.spec).template) && !obj(old.spec).suspend) {
      causes.push(immutableCause('spec.template', obj(next.spec).template));
    }
    if (!deepEqual(obj(next.spec).completions, obj(old.spec).completions))
      causes.push(immutableCause('spec.completions', obj(next.spec).completions));
    return causes;
  },
};

const cronJobStrategy: Strategy = {
  nameRule: 'subdomain',
  defaults(o) {
    const spec = ensure(o, 'spec');
    setDefault(spec, 'suspend', false);
    setDefault(spec, 'concurrencyPolicy', 'Allow');
    setDefault(spec, 'successfulJobsHistoryLimit', 3);
    setDefault(spec, 'failedJobsHistoryLimit', 1);
    defaultPodSpec(ensure(ensure(ensure(ensure(spec, 'jobTemplate'), 'spec'), 'template'), 'spec'));
  },
  prepareForCreate(o) {
    o.status = {};
  },
  prepareForUpdate(next, old, subresource) {
    if (subresource === 'status') next.spec = old.spec;
  },
  validate(o) {
    const spec = obj(o.spec);
    const causes: FieldCause[] = [];
    if (typeof spec.schedule !== 'string' || spec.schedule.trim() === '')
      causes.push(requiredCause('spec.schedule'));
    else {
      try {
        parseCron(spec.schedule, typeof spec.timeZone === 'string' ? spec.timeZone : undefined);
      } catch (err) {
        causes.push(invalidCause('spec.schedule', spec.schedule, (err as Error).message));
      }
    }
    const podSpec = obj(obj(obj(obj(spec.jobTemplate).spec).template).spec);
    causes.push(...podSpecErrors(podSpec, 'spec.jobTemplate.spec.template.spec'));
    return causes;
  },
};

const namespaceStrategy: Strategy = {
  nameRule: 'label',
  prepareForCreate(o) {
    o.status = { phase: 'Active' };
    o.spec = { finalizers: ['kubernetes'] };
  },
  prepareForUpdate(next, old, subresource) {
    if (subresource === 'status') next.spec = old.spec;
    else next.status = old.status;
  },
};

/** kube-apiserver always sets this label to the namespace's name (NamespaceDefaultLabelName). */
export function stampNamespaceLabel(o: KubeObject): void {
  o.metadata.labels = { ...(o.metadata.labels ?? {}), 'kubernetes.io/metadata.name': o.metadata.name ?? '' };
}

const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'];

const nodeStrategy: Strategy = {
  nameRule: 'subdomain',
  prepareForUpdate(next, old, subresource) {
    if (subresource === 'status') next.spec = old.spec;
    else next.status = old.status;
  },
  validate(o) {
    const causes: FieldCause[] = [];
    const seen = new Set<string>();
    arr(obj(o.spec).taints).forEach((t, i) => {
      if (!t.key) causes.push(requiredCause(`spec.taints[${i}].key`));
      if (!TAINT_EFFECTS.includes(String(t.effect))) {
        causes.push({
          reason: 'FieldValueNotSupported',
          field: `spec.taints[${i}].effect`,
          message: `Unsupported value: ${JSON.stringify(t.effect ?? '')}: supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`,
        });
      }
      const id = `${String(t.key)}:${String(t.effect)}`;
      if (seen.has(id))
        causes.push({
          reason: 'FieldValueDuplicate',
          field: `spec.taints[${i}]`,
          message: 'Duplicate value: taints must be unique by key and effect pair',
        });
      seen.add(id);
    });
    return causes;
  },
};

let nextClusterIp = 10;

const serviceStrategy: Strategy = {
  nameRule: 'dns1035',
  defaults(o) {
    const spec = ensure(o, 'spec');
    setDefault(spec, 'type', 'ClusterIP');
    setDefault(spec, 'sessionAffinity', 'None');
    for (const p of arr(spec.ports)) {
      setDefault(p, 'protocol', 'TCP');
      setDefault(p, 'targetPort', p.port);
    }
  },
  prepareForCreate(o) {
    const spec = ensure(o, 'spec');
    if (spec.clusterIP === undefined) {
      const n = nextClusterIp++;
      spec.clusterIP = `10.96.${(n >> 8) & 255}.${n & 255}`;
      spec.clusterIPs = [spec.clusterIP];
    }
    o.status = { loadBalancer: {} };
  },
  prepareForUpdate(next, old, subresource) {
    if (subresource === 'status') next.spec = old.spec;
    else next.status = old.status;
  },
  validateUpdate(next, old, subresource) {
    if (subresource !== '') return [];
    const ip = obj(next.spec).clusterIP;
    return ip === undefined || ip === obj(old.spec).clusterIP ? [] : [immutableCause('spec.clusterIP', ip)];
  },
};

/** Secrets: stringData is merged into base64 data on write, as the API server does. */
const secretStrategy: Strategy = {
  nameRule: 'subdomain',
  defaults(o) {
    setDefault(o as Obj, 'type', 'Opaque');
    const stringData = obj((o as Obj).stringData);
    if (Object.keys(stringData).length) {
      const data = ensure(o as Obj, 'data');
      for (const [k, v] of Object.entries(stringData)) data[k] = Buffer.from(String(v)).toString('base64');
    }
    delete (o as Obj).stringData;
  },
  validate(o) {
    const causes: FieldCause[] = [];
    for (const [k, v] of Object.entries(obj((o as Obj).data))) {
      if (typeof v !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(v))
        causes.push(invalidCause(`data[${k}]`, '<secret contents redacted>', 'illegal base64 data'));
    }
    return causes;
  },
};

const MICROTIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;

/** MicroTime fields are parsed with exactly six fractional digits; anything else fails decoding (400). */
function checkMicroTime(kind: string, value: unknown): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'string' || !MICROTIME.test(value)) {
    const text = String(value);
    const frac = /(\.\d*)?(Z|[+-]\d{2}:\d{2})$/.exec(text)?.[0] ?? text;
    throw badRequest(
      `${kind} in version "v1" cannot be handled as a ${kind}: parsing time "${text}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "${frac}" as ".000000"`,
    );
  }
}

/** The API server stores and returns MicroTime in UTC, whatever offset the client sent. */
function normalizeMicroTime(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const m = /^(.{19})\.(\d{6})(Z|[+-]\d{2}:\d{2})$/.exec(value);
  if (!m || m[3] === 'Z') return value;
  return `${new Date(`${m[1]}${m[3]}`).toISOString().slice(0, 19)}.${m[2]}Z`;
}

const leaseStrategy: Strategy = {
  nameRule: 'subdomain',
  decode(o) {
    const spec = obj(o.spec);
    for (const field of ['acquireTime', 'renewTime']) {
      checkMicroTime('Lease', spec[field]);
      if (spec[field] !== undefined) spec[field] = normalizeMicroTime(spec[field]);
    }
  },
  validate(o) {
    const spec = obj(o.spec);
    const causes: FieldCause[] = [];
    if (
      spec.leaseDurationSeconds !== undefined &&
      spec.leaseDurationSeconds !== null &&
      Number(spec.leaseDurationSeconds) <= 0
    ) {
      causes.push(
        invalidCause('spec.leaseDurationSeconds', spec.leaseDurationSeconds, 'must be greater than 0'),
      );
    }
    if (
      spec.leaseTransitions !== undefined &&
      spec.leaseTransitions !== null &&
      Number(spec.leaseTransitions) < 0
    ) {
      causes.push(
        invalidCause('spec.leaseTransitions', spec.leaseTransitions, 'must be greater than or equal to 0'),
      );
    }
    if (spec.preferredHolder && !spec.strategy) {
      causes.push(forbiddenCause('spec.preferredHolder', 'may only be specified if strategy is defined'));
    }
    return causes;
  },
};

const QUALIFIED_NAME =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
/** Fields of an events.k8s.io/v1 Event that an update may not change (ValidateEventUpdate). */
const EVENT_IMMUTABLE = [
  'eventTime',
  'action',
  'reason',
  'reportingController',
  'reportingInstance',
  'regarding',
  'related',
  'type',
];

const eventsV1Strategy: Strategy = {
  nameRule: 'subdomain',
  decode(o) {
    checkMicroTime('Event', (o as Obj).eventTime);
    checkMicroTime('Event', obj((o as Obj).series).lastObservedTime);
  },
  validate(o) {
    const e = o as Obj;
    const causes: FieldCause[] = [];
    if (!e.eventTime) causes.push(requiredCause('eventTime'));
    for (const f of ['reportingController', 'reportingInstance', 'action', 'reason']) {
      if (!e[f]) causes.push(requiredCause(f));
    }
    if (
      typeof e.reportingController === 'string' &&
      e.reportingController &&
      !QUALIFIED_NAME.test(e.reportingController)
    ) {
      causes.push(
        invalidCause(
          'reportingController',
          e.reportingController,
          "name part must consist of alphanumeric characters, '-', '_' or '.'",
        ),
      );
    }
    for (const f of ['reason', 'action']) {
      if (typeof e[f] === 'string' && (e[f] as string).length > 128) {
        causes.push(invalidCause(f, e[f], 'can have at most 128 characters'));
      }
    }
    if (typeof e.note === 'string' && Buffer.byteLength(e.note) > 1024) {
      causes.push(invalidCause('note', e.note, 'can have at most 1024 characters'));
    }
    if (e.type !== 'Normal' && e.type !== 'Warning') {
      causes.push({
        reason: 'FieldValueInvalid',
        field: 'type',
        message: `Invalid value: ${JSON.stringify(e.type ?? '')}: has invalid value: ${String(e.type ?? '')}`,
      });
    }
    const series = e.series;
    if (isObj(series)) {
      if (!(Number(series.count) >= 2))
        causes.push(invalidCause('series.count', series.count, 'should be at least 2'));
      if (!series.lastObservedTime) causes.push(requiredCause('series.lastObservedTime'));
    }
    const regardingNs = obj(e.regarding).namespace;
    if (typeof regardingNs === 'string' && regardingNs !== '' && regardingNs !== o.metadata.namespace) {
      causes.push(invalidCause('regarding.namespace', regardingNs, 'does not match event.namespace'));
    }
    return causes;
  },
  validateUpdate(next, old) {
    const causes: FieldCause[] = [];
    for (const f of EVENT_IMMUTABLE) {
      if (!deepEqual((next as Obj)[f], (old as Obj)[f])) causes.push(immutableCause(f, (next as Obj)[f]));
    }
    return causes;
  },
};

function webhookConfigStrategy(mutating: boolean): Strategy {
  return {
    nameRule: 'subdomain',
    defaults(o) {
      for (const w of arr((o as Obj).webhooks)) {
        setDefault(w, 'failurePolicy', 'Fail');
        setDefault(w, 'matchPolicy', 'Equivalent');
        setDefault(w, 'namespaceSelector', {});
        setDefault(w, 'objectSelector', {});
        setDefault(w, 'timeoutSeconds', 10);
        if (mutating) setDefault(w, 'reinvocationPolicy', 'Never');
        for (const r of arr(w.rules)) setDefault(r, 'scope', '*');
        const svc = obj(obj(w.clientConfig).service);
        if (isObj(obj(w.clientConfig).service)) setDefault(svc, 'port', 443);
      }
    },
    validate(o) {
      const causes: FieldCause[] = [];
      const names = new Set<string>();
      arr((o as Obj).webhooks).forEach((w, i) => {
        const p = `webhooks[${i}]`;
        const name = String(w.name ?? '');
        if (!name) causes.push(requiredCause(`${p}.name`));
        else if (name.split('.').length < 3)
          causes.push(
            invalidCause(
              `${p}.name`,
              name,
              'should be a domain with at least three segments separated by dots',
            ),
          );
        if (names.has(name))
          causes.push({
            reason: 'FieldValueDuplicate',
            field: `${p}.name`,
            message: `Duplicate value: ${JSON.stringify(name)}`,
          });
        names.add(name);
        const versions = Array.isArray(w.admissionReviewVersions) ? w.admissionReviewVersions : [];
        if (versions.length === 0)
          causes.push(requiredCause(`${p}.admissionReviewVersions`, 'must specify one of v1, v1beta1'));
        if (w.sideEffects === undefined)
          causes.push(requiredCause(`${p}.sideEffects`, 'must specify one of None, NoneOnDryRun'));
        else if (!['None', 'NoneOnDryRun'].includes(String(w.sideEffects))) {
          causes.push({
            reason: 'FieldValueNotSupported',
            field: `${p}.sideEffects`,
            message: `Unsupported value: ${JSON.stringify(w.sideEffects)}: supported values: "None", "NoneOnDryRun"`,
          });
        }
        if (!['Fail', 'Ignore'].includes(String(w.failurePolicy))) {
          causes.push({
            reason: 'FieldValueNotSupported',
            field: `${p}.failurePolicy`,
            message: `Unsupported value: ${JSON.stringify(w.failurePolicy)}: supported values: "Fail", "Ignore"`,
          });
        }
        const timeout = Number(w.timeoutSeconds);
        if (!(timeout >= 1 && timeout <= 30))
          causes.push(
            invalidCause(
              `${p}.timeoutSeconds`,
              w.timeoutSeconds,
              'the timeout value must be between 1 and 30 seconds',
            ),
          );
        const cc = obj(w.clientConfig);
        const hasUrl = typeof cc.url === 'string';
        const hasService = isObj(cc.service);
        if (hasUrl === hasService)
          causes.push(requiredCause(`${p}.clientConfig`, 'exactly one of url or service is required'));
        if (hasService) {
          const svc = obj(cc.service);
          if (!svc.name)
            causes.push(requiredCause(`${p}.clientConfig.service.name`, 'service name is required'));
          if (!svc.namespace)
            causes.push(
              requiredCause(`${p}.clientConfig.service.namespace`, 'service namespace is required'),
            );
        }
        if (hasUrl && !String(cc.url).startsWith('https://')) {
          causes.push(
            invalidCause(`${p}.clientConfig.url`, cc.url, "'https' is the only allowed URL scheme"),
          );
        }
      });
      return causes;
    },
  };
}

const STRATEGIES: Record<string, Strategy> = {
  '/pods': podStrategy,
  '/namespaces': namespaceStrategy,
  '/nodes': nodeStrategy,
  '/services': serviceStrategy,
  '/secrets': secretStrategy,
  'coordination.k8s.io/leases': leaseStrategy,
  'events.k8s.io/events': eventsV1Strategy,
  'apps/deployments': workloadStrategy('Deployment'),
  'apps/statefulsets': workloadStrategy('StatefulSet'),
  'apps/replicasets': workloadStrategy('ReplicaSet'),
  'apps/daemonsets': workloadStrategy('DaemonSet'),
  'batch/jobs': jobStrategy,
  'batch/cronjobs': cronJobStrategy,
  'admissionregistration.k8s.io/mutatingwebhookconfigurations': webhookConfigStrategy(true),
  'admissionregistration.k8s.io/validatingwebhookconfigurations': webhookConfigStrategy(false),
  'apiextensions.k8s.io/customresourcedefinitions': crdStrategy,
  'rbac.authorization.k8s.io/roles': { nameRule: 'path' },
  'rbac.authorization.k8s.io/clusterroles': { nameRule: 'path' },
  'rbac.authorization.k8s.io/rolebindings': { nameRule: 'path' },
  'rbac.authorization.k8s.io/clusterrolebindings': { nameRule: 'path' },
};

const GENERIC: Strategy = { nameRule: 'subdomain' };

export function strategyFor(typeKey: string): Strategy {
  return STRATEGIES[typeKey] ?? GENERIC;
}
