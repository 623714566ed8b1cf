// Helpers shared by the simulated controllers: identities, ownerReferences, Pod predicates, conditions,
// template hashing and Pods built from templates. Everything here is pure.
import type { RequestContext } from '../objects.ts';
import { type LabelSelectorObject, matchesLabelSelectorObject } from '../selectors.ts';
import { deepEqual } from '../strategy.ts';
import { type KubeObject, type OwnerReference, StatusError, type UserInfo } from '../types.ts';

export type Obj = Record<string, unknown>;

export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
export const obj = (v: unknown): Obj => (isObj(v) ? v : {});
export const arr = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : []);
export const num = (v: unknown, fallback: number): number =>
  typeof v === 'number' && Number.isFinite(v) ? v : fallback;
export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
export const strMap = (v: unknown): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(obj(v))) if (typeof val === 'string') out[k] = val;
  return out;
};

export const nameOf = (o: KubeObject): string => o.metadata.name ?? '';
export const namespaceOf = (o: KubeObject): string => o.metadata.namespace ?? '';
export const keyOf = (o: KubeObject): string => `${namespaceOf(o)}/${nameOf(o)}`;
export function splitKey(key: string): { namespace: string; name: string } {
  const slash = key.indexOf('/');
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/** Annotations of the simulator itself (documented in index.ts). */
export const ANNOTATION_PREFIX = 'sandbox.berth.skaphos.io/';
export const TRIGGER_ANNOTATION = `${ANNOTATION_PREFIX}trigger`;
export const RUN_MS_ANNOTATION = `${ANNOTATION_PREFIX}run-ms`;
export const EXIT_CODE_ANNOTATION = `${ANNOTATION_PREFIX}exit-code`;

// ---------------------------------------------------------------------------------------------------------
// Identities

/** A kube-controller-manager controller's service account, as the real controllers authenticate. */
export function controllerUser(controller: string): UserInfo {
  return {
    username: `system:serviceaccount:kube-system:${controller}`,
    groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'],
  };
}

export const SCHEDULER_USER: UserInfo = {
  username: 'system:kube-scheduler',
  groups: ['system:authenticated'],
};

export function nodeUser(node: string): UserInfo {
  return { username: `system:node:${node}`, groups: ['system:nodes', 'system:authenticated'] };
}

/** A fresh request context per call (warnings are per request). */
export function requestContext(user: UserInfo, fieldManager: string): RequestContext {
  return { user, dryRun: false, fieldManager, warnings: [] };
}

// ---------------------------------------------------------------------------------------------------------
// Errors

export const isStatus = (err: unknown, code: number, reason?: string): boolean =>
  err instanceof StatusError && err.code === code && (reason === undefined || err.reason === reason);
export const isNotFound = (err: unknown): boolean => isStatus(err, 404);
export const isConflict = (err: unknown): boolean => isStatus(err, 409, 'Conflict');
export const isAlreadyExists = (err: unknown): boolean => isStatus(err, 409, 'AlreadyExists');
export const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));

// ---------------------------------------------------------------------------------------------------------
// Ownership

export function controllerRefOf(o: KubeObject): OwnerReference | undefined {
  return (o.metadata.ownerReferences ?? []).find((r) => r.controller === true);
}

export const isControlledBy = (o: KubeObject, owner: KubeObject): boolean =>
  owner.metadata.uid !== undefined && controllerRefOf(o)?.uid === owner.metadata.uid;

/** The ownerReference the real controllers put on what they create. */
export function newControllerRef(owner: KubeObject, apiVersion: string, kind: string): OwnerReference {
  return {
    apiVersion,
    kind,
    name: nameOf(owner),
    uid: owner.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

export function selectorOf(o: KubeObject): LabelSelectorObject | undefined {
  const selector = obj(o.spec).selector;
  return isObj(selector) ? (selector as LabelSelectorObject) : undefined;
}

/** Label selector match; an invalid selector matches nothing. */
export function selectorMatches(selector: LabelSelectorObject | undefined, labels: Record<string, string>) {
  try {
    return matchesLabelSelectorObject(selector, labels);
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Pods

export const podSpec = (pod: KubeObject): Obj => obj(pod.spec);
export const podStatus = (pod: KubeObject): Obj => obj(pod.status);
export const podPhase = (pod: KubeObject): string => str(podStatus(pod).phase) ?? 'Pending';
export const isTerminating = (o: KubeObject): boolean => o.metadata.deletionTimestamp !== undefined;
export const isPodTerminal = (pod: KubeObject): boolean =>
  podPhase(pod) === 'Succeeded' || podPhase(pod) === 'Failed';
/** controller.IsPodActive: not terminal and not being deleted. */
export const isPodActive = (pod: KubeObject): boolean => !isPodTerminal(pod) && !isTerminating(pod);
export const nodeNameOf = (pod: KubeObject): string | undefined => str(podSpec(pod).nodeName) || undefined;
export const schedulingGatesOf = (pod: KubeObject): Obj[] => arr(podSpec(pod).schedulingGates);

export function podCondition(pod: KubeObject, type: string): Obj | undefined {
  return arr(podStatus(pod).conditions).find((c) => c.type === type);
}

export const isPodReady = (pod: KubeObject): boolean => podCondition(pod, 'Ready')?.status === 'True';
export const isRunningAndReady = (pod: KubeObject): boolean => podPhase(pod) === 'Running' && isPodReady(pod);

export const parseTime = (v: unknown): number | undefined => {
  if (typeof v !== 'string') return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
};

/**
 * Milliseconds until a Ready Pod counts as available (podutil.IsPodAvailable): 0 when it is available now,
 * undefined when it is not Ready at all.
 */
export function msUntilAvailable(pod: KubeObject, minReadySeconds: number, now: number): number | undefined {
  if (!isPodReady(pod)) return undefined;
  if (minReadySeconds <= 0) return 0;
  const since = parseTime(podCondition(pod, 'Ready')?.lastTransitionTime);
  if (since === undefined) return 0;
  return Math.max(0, since + minReadySeconds * 1000 - now);
}

export const isPodAvailable = (pod: KubeObject, minReadySeconds: number, now: number): boolean =>
  msUntilAvailable(pod, minReadySeconds, now) === 0;

/** The earliest time (ms from now) at which one of the Ready Pods becomes available, for a requeue. */
export function nextAvailabilityMs(pods: KubeObject[], minReadySeconds: number, now: number) {
  let next: number | undefined;
  for (const pod of pods) {
    const ms = msUntilAvailable(pod, minReadySeconds, now);
    if (ms !== undefined && ms > 0 && (next === undefined || ms < next)) next = ms;
  }
  return next;
}

export interface PodTemplateOptions {
  namespace: string;
  name?: string;
  generateName?: string;
  ownerRef: OwnerReference;
  extraLabels?: Record<string, string>;
  /** Fields set on the Pod spec on top of the template's (StatefulSet hostname/subdomain). */
  extraSpec?: Obj;
}

/** controller.GetPodFromTemplate: labels, annotations, finalizers and spec of the template. */
export function podFromTemplate(template: unknown, opts: PodTemplateOptions): KubeObject {
  const t = obj(template);
  const meta = obj(t.metadata);
  const labels = { ...strMap(meta.labels), ...(opts.extraLabels ?? {}) };
  const annotations = strMap(meta.annotations);
  const finalizers = Array.isArray(meta.finalizers)
    ? meta.finalizers.filter((f) => typeof f === 'string')
    : [];
  const pod: KubeObject = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      namespace: opts.namespace,
      labels,
      ownerReferences: [opts.ownerRef],
    },
    spec: { ...structuredClone(obj(t.spec)), ...(opts.extraSpec ?? {}) },
  };
  if (opts.name) pod.metadata.name = opts.name;
  else if (opts.generateName) pod.metadata.generateName = opts.generateName;
  if (Object.keys(annotations).length > 0) pod.metadata.annotations = annotations;
  if (finalizers.length > 0) pod.metadata.finalizers = finalizers;
  return pod;
}

/** controller.getPodsPrefix: `<name>-`, cut so that the generated name stays a valid label. */
export function podNamePrefix(controllerName: string): string {
  const prefix = `${controllerName}-`;
  return prefix.length > 58 ? prefix.slice(0, 58) : prefix;
}

/**
 * Order in which surplus Pods are deleted (controller.ActivePods): unassigned before assigned, Pending
 * before Unknown before Running, not Ready before Ready, more restarts first, newer before older.
 */
export function deletionOrder(a: KubeObject, b: KubeObject): number {
  const assigned = (p: KubeObject) => (nodeNameOf(p) ? 1 : 0);
  if (assigned(a) !== assigned(b)) return assigned(a) - assigned(b);
  const phaseRank = (p: KubeObject) => ({ Pending: 0, Unknown: 1, Running: 2 })[podPhase(p)] ?? 0;
  if (phaseRank(a) !== phaseRank(b)) return phaseRank(a) - phaseRank(b);
  const ready = (p: KubeObject) => (isPodReady(p) ? 1 : 0);
  if (ready(a) !== ready(b)) return ready(a) - ready(b);
  const restarts = (p: KubeObject) =>
    arr(podStatus(p).containerStatuses).reduce((n, c) => n + num(c.restartCount, 0), 0);
  if (restarts(a) !== restarts(b)) return restarts(b) - restarts(a);
  const created = (p: KubeObject) => parseTime(p.metadata.creationTimestamp) ?? 0;
  if (created(a) !== created(b)) return created(b) - created(a);
  return nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------------------
// Conditions

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  lastUpdateTime?: string;
  lastProbeTime?: string | null;
}

export function conditionsOf(status: unknown): Condition[] {
  return arr(obj(status).conditions) as unknown as Condition[];
}

export const findCondition = (conditions: Condition[], type: string): Condition | undefined =>
  conditions.find((c) => c.type === type);

export const conditionTrue = (conditions: Condition[], type: string): boolean =>
  findCondition(conditions, type)?.status === 'True';

/**
 * Sets a condition the way the controllers' SetCondition helpers do: an unchanged status, reason and
 * message keep the stored condition as is; lastTransitionTime only moves when the status changes.
 */
export function setCondition(
  conditions: Condition[],
  next: { type: string; status: Condition['status']; reason: string; message: string },
  nowIso: string,
  withUpdateTime = false,
): Condition[] {
  const current = findCondition(conditions, next.type);
  if (
    current &&
    current.status === next.status &&
    current.reason === next.reason &&
    current.message === next.message
  ) {
    return conditions;
  }
  const cond: Condition = { type: next.type, status: next.status };
  if (withUpdateTime) cond.lastUpdateTime = nowIso;
  cond.lastTransitionTime =
    current && current.status === next.status ? (current.lastTransitionTime ?? nowIso) : nowIso;
  cond.reason = next.reason;
  cond.message = next.message;
  return current ? conditions.map((c) => (c.type === next.type ? cond : c)) : [...conditions, cond];
}

export const removeCondition = (conditions: Condition[], type: string): Condition[] =>
  conditions.filter((c) => c.type !== type);

// ---------------------------------------------------------------------------------------------------------
// Status helpers

/** Drops fields that Go would omit (`omitempty` zero values and undefined). */
export function omitEmpty(status: Obj, keys: string[]): Obj {
  const out: Obj = {};
  for (const [k, v] of Object.entries(status)) {
    if (v === undefined) continue;
    if (keys.includes(k) && (v === 0 || v === '' || (Array.isArray(v) && v.length === 0))) continue;
    out[k] = v;
  }
  return out;
}

export const sameStatus = (a: unknown, b: unknown): boolean => deepEqual(a ?? {}, b ?? {});

// ---------------------------------------------------------------------------------------------------------
// Hashing

/**
 * JSON with sorted keys, where a null or empty-list member counts as absent (as for Go's typed objects and
 * apimachinery's semantic equality: `creationTimestamp: null` or `env: []` equal their absence), so that
 * semantically equal objects hash and compare equally.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(',')}]`;
  if (isObj(value)) {
    const keys = Object.keys(value)
      .filter((k) => {
        const v = value[k];
        return v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0);
      })
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** 32-bit FNV-1a, the hash kube's controller.ComputeHash uses. */
export function fnv32a(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

const SAFE_ALPHANUMS = 'bcdfghjklmnpqrstvwxz2456789';

/** rand.SafeEncodeString: maps each character into an alphabet without vowels (no accidental words). */
export function safeEncode(s: string): string {
  let out = '';
  for (const ch of s) out += SAFE_ALPHANUMS[(ch.codePointAt(0) ?? 0) % SAFE_ALPHANUMS.length];
  return out;
}

/** The `pod-template-hash` / revision hash of a Pod template, shaped like kube's (e.g. `5d8c7b6f4`). */
export function templateHash(template: unknown): string {
  return safeEncode(String(fnv32a(canonicalJson(template))));
}

// ---------------------------------------------------------------------------------------------------------
// Numbers

/** intstr.GetScaledValueFromIntOrPercent. */
export function scaledValue(value: unknown, total: number, roundUp: boolean): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'string') {
    const m = /^(\d+)%$/.exec(value);
    if (m) {
      const exact = (Number(m[1]) * total) / 100;
      return roundUp ? Math.ceil(exact) : Math.floor(exact);
    }
    const n = Number(value);
    if (Number.isInteger(n)) return n;
  }
  return 0;
}
