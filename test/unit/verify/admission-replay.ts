// The trace replay of admission.pml (docs/verification.md, "Trace replay"): every write a trace of the
// model's random simulation sends through the webhooks goes through the real decision code
// (decideWorkloadAdmission: resolve.ts's owner walk, stamping, decide-validate.ts's rules, recordTarget),
// mutating then validating, over a FakeIO holding exactly what the model's cluster holds at that point
// (the trace's last `state`) and lease caches showing what each of the model's caches shows. The model
// supplies the environment: the operator's activation, Stopping, drain and registrations, the
// controllers, the kubelet, the other cluster, the caches' lags. The replay checks (1) that the code
// decides what the model decided (allowed or denied on each path, the stamp and the gate the mutating
// webhook leaves, the target recorded) and (2) the model's invariants on the code's outputs: no running
// Pod of a lease's chain unregistered or while the lease is not held, no gate lifted while the lease is
// not Active, a Deployment created while a lease targets it stamped for that lease.

import { MANAGED_UID, SCHEDULING_GATE } from '../../../src/berth/api.ts';
import type { JsonObject } from '../../../src/workloads/model.ts';
import {
  type Actor,
  type AdmissionEvent,
  type AdmissionState,
  type DeploymentState,
  INCARNATIONS,
  type Incarnation,
  type LeaseState,
  type PodState,
  type ReplicaSetState,
  type View,
} from '../../../verify/admission-trace.ts';
import { type AdmissionMode, decideWorkloadAdmission } from '../../../webhooks/decide-workload.ts';
import type { LeaseCache } from '../../../webhooks/leases.ts';
import type { Binding } from '../../../webhooks/resolve.ts';
import type { Decision } from '../../../webhooks/review.ts';
import { rfc3339 } from '../../builders/object.ts';
import { FakeIO } from '../../fixtures/webhooks/fake-io.ts';
import {
  activeWorkload,
  berthLease,
  type Kind,
  NS,
  OPERATOR_USER,
  request,
  stamped,
  USER,
  workload,
} from '../../fixtures/webhooks/objects.ts';
import { applyDecision, NOW } from '../../fixtures/webhooks/world.ts';

const NAME = 'web';
const RS_NAME = 'web-abc';
const RS_UID = 'rs-uid-abc';
const leaseUID = (l: number): string => `lease-uid-${l}`;
const deploymentUID = (d: number): string => `deploy-uid-${d}`;
const podName = (k: number): string => `${RS_NAME}-${k}`;
const podUID = (k: number): string => `pod-uid-${k}`;
const bindingOf = (l: number): Binding => ({ name: NAME, uid: leaseUID(l), targetUID: '' });

const kubeSystem = (name: string): string => `system:serviceaccount:kube-system:${name}`;
const USERS: Record<Actor | 'deployment' | 'gc', string> = {
  user: USER,
  replicaset: kubeSystem('replicaset-controller'),
  deployment: kubeSystem('deployment-controller'),
  gc: kubeSystem('generic-garbage-collector'),
  operator: OPERATOR_USER,
  replica: OPERATOR_USER,
};

// ---- the model's objects as the API server holds them ----

const isRecord = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const record = (v: unknown): JsonObject => (isRecord(v) ? v : {});
const templateOf = (o: JsonObject, kind: Kind): JsonObject =>
  kind === 'Pod' ? o : record(record(o.spec).template);
const gated = (o: JsonObject, kind: Kind): boolean => {
  const gates = record(templateOf(o, kind).spec).schedulingGates;
  return Array.isArray(gates) && gates.some((g) => isRecord(g) && g.name === SCHEDULING_GATE);
};

/** The lease incarnation an object is stamped for (its managed-lease-uid annotation), 0 unstamped. */
function stampOf(o: JsonObject): number {
  const uid = record(record(o.metadata).annotations)[MANAGED_UID];
  if (uid === undefined) return 0;
  const l = INCARNATIONS.find((x) => leaseUID(x) === uid);
  if (l === undefined) throw new Error(`stamped for an unknown lease ${String(uid)}`);
  return l;
}

/** A copy of `o` whose Pod template carries the scheduling gate exactly when `gate`. */
function withGate(o: JsonObject, kind: Kind, gate: boolean): JsonObject {
  const out = structuredClone(o);
  const template = templateOf(out, kind);
  const spec = record(template.spec);
  const others = (Array.isArray(spec.schedulingGates) ? spec.schedulingGates : []).filter(
    (g) => !(isRecord(g) && g.name === SCHEDULING_GATE),
  );
  template.spec = { ...spec, schedulingGates: gate ? [...others, { name: SCHEDULING_GATE }] : others };
  return out;
}

/** Stamped for lease `l` as the mutating webhook leaves it (0: as written), the gate as given. */
const managed = (kind: Kind, plain: JsonObject, l: number, gate: boolean): JsonObject =>
  withGate(l === 0 ? plain : stamped(kind, plain, bindingOf(l)), kind, gate);

const registeredPods = (s: LeaseState): { name: string; uid: string }[] =>
  [0, 1].filter((k) => (s.pods & (1 << k)) !== 0).map((k) => ({ name: podName(k), uid: podUID(k) }));

/** BerthLease `web`, incarnation l: a deadline an hour ahead while Active, past once the model lost it. */
function leaseObject(l: Incarnation, s: LeaseState): JsonObject {
  const pods = registeredPods(s);
  const target = s.record === 0 ? '' : deploymentUID(s.record);
  const deadline = s.lost ? NOW - 60_000 : NOW + 3_600_000;
  const status =
    s.phase === 'none'
      ? { targetUID: target, ...(pods.length > 0 ? { pods } : {}) }
      : { ...activeWorkload(target, deadline, pods), phase: s.phase === 'active' ? 'Active' : 'Stopping' };
  const workloadStatus =
    s.record === 0 && s.phase === 'none' && pods.length === 0 ? {} : { workload: status };
  return berthLease(NAME, {
    uid: leaseUID(l),
    target: { kind: 'Deployment', name: NAME },
    deleting: s.deleting,
    ...workloadStatus,
  });
}

const deploymentObject = (d: number, s: DeploymentState): JsonObject =>
  managed(
    'Deployment',
    workload('Deployment', NAME, { uid: deploymentUID(d), replicas: s.replicas }),
    s.stamp,
    s.gate,
  );

function replicaSetObject(s: ReplicaSetState, owner: number): JsonObject {
  // stampedObject stamps the object and its template for one lease, as the model's ReplicaSet is.
  if (s.stamp !== s.templateStamp) throw new Error('not replayed: a template stamped for another lease');
  const owned =
    owner === 0 ? {} : { owner: { kind: 'Deployment' as const, name: NAME, uid: deploymentUID(owner) } };
  return managed(
    'ReplicaSet',
    workload('ReplicaSet', RS_NAME, { uid: RS_UID, replicas: s.replicas, ...owned }),
    s.stamp,
    s.gate,
  );
}

function podObject(k: number, p: Pick<PodState, 'owned' | 'stamp' | 'gate' | 'deleting'>): JsonObject {
  const owned = p.owned ? { owner: { kind: 'ReplicaSet' as const, name: RS_NAME, uid: RS_UID } } : {};
  const pod = managed(
    'Pod',
    workload('Pod', podName(k), { uid: podUID(k), labels: { app: RS_NAME }, ...owned }),
    p.stamp,
    p.gate,
  );
  if (p.deleting) record(pod.metadata).deletionTimestamp = rfc3339(NOW - 1000);
  return pod;
}

/** The cluster of one model state, as objects. */
interface World {
  state: AdmissionState;
  leases: Map<Incarnation, JsonObject>;
  deployments: Map<Incarnation, JsonObject>;
  replicaSet: JsonObject | undefined;
  pods: Map<number, JsonObject>;
}

function worldOf(state: AdmissionState): World {
  const live = <T>(entries: [Incarnation, T][]): Map<Incarnation, T> => new Map(entries);
  const deployments = live(
    INCARNATIONS.filter((d) => state.deployments[d].exists).map((d) => [
      d,
      deploymentObject(d, state.deployments[d]),
    ]),
  );
  // Both incarnations are named `web`: the model never has both at once.
  if (deployments.size > 1 || INCARNATIONS.every((l) => state.leases[l].exists))
    throw new Error('not replayed: two incarnations of one name at once');
  return {
    state,
    leases: live(
      INCARNATIONS.filter((l) => state.leases[l].exists).map((l) => [l, leaseObject(l, state.leases[l])]),
    ),
    deployments,
    replicaSet: state.replicaSet.exists
      ? replicaSetObject(state.replicaSet, state.replicaSet.owner)
      : undefined,
    pods: new Map(
      state.pods.flatMap((p, k) => (p.exists ? [[k, podObject(k, p)] as [number, JsonObject]] : [])),
    ),
  };
}

function ioOf(w: World): FakeIO {
  const io = new FakeIO();
  for (const lease of w.leases.values()) io.addLease(lease);
  for (const d of w.deployments.values()) io.addWorkload('Deployment', d);
  if (w.replicaSet !== undefined) io.addWorkload('ReplicaSet', w.replicaSet);
  for (const p of w.pods.values()) io.addWorkload('Pod', p);
  return io;
}

/** A webhook's lease cache as the model's shows it: a lease it still shows after its deletion, as it was. */
const cacheOf = (state: AdmissionState, view: View): LeaseCache => ({
  synced: () => true,
  inNamespace: (namespace) =>
    namespace !== NS
      ? []
      : INCARNATIONS.filter((l) => state.cache[view][l]).map((l) => leaseObject(l, state.leases[l])),
});

// ---- the invariants, on the objects ----

const ownerUID = (o: JsonObject): string | undefined => {
  const refs = record(o.metadata).ownerReferences;
  const ref = Array.isArray(refs) ? refs.find((r) => isRecord(r) && r.controller === true) : undefined;
  return isRecord(ref) && typeof ref.uid === 'string' ? ref.uid : undefined;
};
const workloadOf = (lease: JsonObject): JsonObject => record(record(lease.status).workload);

/** The leases whose chain the Pod is in: stamped for it, or under a Deployment it targets (recorded or created while it existed). */
function chainLeases(w: World, pod: JsonObject): Incarnation[] {
  const rs = w.replicaSet;
  const root =
    rs !== undefined && ownerUID(pod) === RS_UID
      ? INCARNATIONS.find((d) => w.deployments.has(d) && ownerUID(rs) === deploymentUID(d))
      : undefined;
  return [...w.leases.entries()]
    .filter(
      ([l, lease]) =>
        stampOf(pod) === l ||
        (root !== undefined &&
          (workloadOf(lease).targetUID === deploymentUID(root) || w.state.deployments[root].should === l)),
    )
    .map(([l]) => l);
}

/** registration and held: every running Pod (ungated, also while deleting) of a chain is registered and held. */
function unregisteredRunning(w: World): string | undefined {
  for (const [k, pod] of w.pods) {
    if (gated(pod, 'Pod')) continue;
    for (const l of chainLeases(w, pod)) {
      const pods = workloadOf(w.leases.get(l)!).pods;
      const registered =
        Array.isArray(pods) && pods.some((r) => isRecord(r) && r.uid === podUID(k) && r.name === podName(k));
      if (!registered) return `Pod ${k} runs in lease ${l}'s chain unregistered`;
      if (!w.state.leases[l].held) return `Pod ${k} runs in lease ${l}'s chain while the lease is not held`;
    }
  }
  return undefined;
}

/** gate: the lease a Pod is stamped for is live and Active with a deadline ahead. */
function liveActive(w: World, l: number): boolean {
  const lease = INCARNATIONS.includes(l as Incarnation) ? w.leases.get(l as Incarnation) : undefined;
  if (lease === undefined || record(lease.metadata).deletionTimestamp !== undefined) return false;
  const status = workloadOf(lease);
  return status.phase === 'Active' && Date.parse(String(status.deadline)) > NOW;
}

// ---- the replay ----

export interface AdmissionReplayReport {
  events: number;
  /** Reviews sent through the code by event kind, writer and webhook: [allowed, denied]. */
  reviews: Record<string, [number, number]>;
  /** Pods the code admitted stamped for a lease (and so gated). */
  gatedPods: number;
  /** Gates the code let the operator lift. */
  ungates: number;
  /** Deployments the code stamped and recorded as a lease's target. */
  recorded: number;
}

/** A mismatch between the model and the code, or a broken invariant, with the events before it. */
export class AdmissionReplayError extends Error {
  constructor(message: string, events: readonly AdmissionEvent[], at: number) {
    const context = events
      .slice(0, at + 1)
      .filter((e, i) => e.kind !== 'state' || i === at)
      .slice(-12)
      .map((e, i, all) => `${i === all.length - 1 ? '>' : ' '} ${e.line}`)
      .join('\n');
    super(`event ${at} (${events[at]?.line ?? 'end'}): ${message}\n${context}`);
    this.name = 'AdmissionReplayError';
  }
}

const verdict = (allowed: boolean): string => (allowed ? 'allowed' : 'denied');
const said = (d: Decision): string => (d.allowed ? 'allowed' : `denied (${d.reason}: ${d.message})`);

/** Replays one trace; throws AdmissionReplayError at the first disagreement or broken invariant. */
export async function replayAdmission(events: readonly AdmissionEvent[]): Promise<AdmissionReplayReport> {
  const report: AdmissionReplayReport = { events: 0, reviews: {}, gatedPods: 0, ungates: 0, recorded: 0 };
  let at = 0;
  const fail = (message: string): never => {
    throw new AdmissionReplayError(message, events, at);
  };
  let state: AdmissionState | undefined;
  let built: World | undefined;
  /** The objects of the last state, built when a review reads them. */
  const world = (): World => {
    built ??= worldOf(state ?? fail('a review before the first state'));
    return built;
  };
  /** The target the code recorded at the last review (lease, Deployment), checked against the next state. */
  let wrote: { l: number; d: number } | undefined;

  const review = async (
    mode: AdmissionMode,
    kind: Kind,
    object: JsonObject,
    options: { old?: JsonObject; username: string },
  ): Promise<{ decision: Decision; io: FakeIO }> => {
    const w = world();
    const io = ioOf(w);
    const req = request(kind, options.old === undefined ? 'CREATE' : 'UPDATE', object, options);
    const view: View = mode === 'mutate' ? 'mutating' : 'validating';
    const decision = await decideWorkloadAdmission(req, mode, {
      io,
      now: () => NOW,
      operatorUser: OPERATOR_USER,
      leaseCache: cacheOf(w.state, view),
    });
    if (mode === 'validate' && decision.allowed && (decision.patch ?? []).length > 0)
      fail('the validating webhook patched');
    return { decision, io };
  };
  const expectVerdict = (
    e: AdmissionEvent,
    path: 'mutating' | 'validating',
    model: boolean,
    d: Decision,
  ): void => {
    if (d.allowed !== model) fail(`the code's ${path} webhook ${said(d)}, the model ${verdict(model)}`);
    count(e, path, d.allowed);
  };
  const count = (e: AdmissionEvent, path: 'mutating' | 'validating', allowed: boolean): void => {
    const key = `${e.kind}${'by' in e ? ` by ${e.by}` : ''} ${path}`;
    const [a, d] = report.reviews[key] ?? [0, 0];
    report.reviews[key] = allowed ? [a + 1, d] : [a, d + 1];
  };
  /** The world once the code's admitted object is written, whose invariants must hold. */
  const afterWrite = (change: (w: World) => void): void => {
    const w = world();
    const next: World = {
      ...w,
      leases: new Map(w.leases),
      deployments: new Map(w.deployments),
      pods: new Map(w.pods),
    };
    change(next);
    const broken = unregisteredRunning(next);
    if (broken !== undefined) fail(`invariant broken by the code's output: ${broken}`);
  };
  const existing = <T>(o: T | undefined, what: string): T =>
    o ?? fail(`the trace writes ${what}, which does not exist`);

  /** An UPDATE through the validating webhook (the mutating one is registered for CREATE only). */
  const update = async (
    e: AdmissionEvent & { validating: boolean },
    kind: Kind,
    old: JsonObject,
    next: JsonObject,
    username: string,
  ): Promise<Decision> => {
    const { decision } = await review('validate', kind, next, { old, username });
    expectVerdict(e, 'validating', e.validating, decision);
    return decision;
  };

  for (; at < events.length; at++) {
    const e = events[at]!;
    report.events++;
    switch (e.kind) {
      case 'state': {
        const before = state;
        state = e.state;
        built = undefined;
        // The target recorded in the model's state is the one the code wrote, and only that.
        for (const l of INCARNATIONS) {
          const changed = before !== undefined && before.leases[l].record !== e.state.leases[l].record;
          const written = wrote?.l === l;
          if (changed !== written || (written && e.state.leases[l].record !== wrote?.d))
            fail(
              `lease ${l}'s target: the code recorded ${wrote?.l === l ? wrote.d : 'none'}, the model ${e.state.leases[l].record}`,
            );
        }
        wrote = undefined;
        break;
      }
      case 'podcreate': {
        const w = world();
        if (e.slot !== w.state.next) fail(`the Pod slot is ${e.slot}, the state's next ${w.state.next}`);
        const pod = podObject(e.slot, { owned: e.own, stamp: e.stamp, gate: e.gate, deleting: false });
        const username = USERS[e.by];
        const m = await review('mutate', 'Pod', pod, { username });
        expectVerdict(e, 'mutating', e.mutating, m.decision);
        if (!m.decision.allowed) break;
        const mutated = applyDecision(pod, m.decision);
        if (stampOf(mutated) !== e.mstamp || gated(mutated, 'Pod') !== e.mgate)
          fail(
            `the code's mutating webhook left stamp ${stampOf(mutated)} gate ${gated(mutated, 'Pod')}, the model stamp ${e.mstamp} gate ${e.mgate}`,
          );
        const v = await review('validate', 'Pod', mutated, { username });
        expectVerdict(e, 'validating', e.validating, v.decision);
        if (v.io.calls.some((c) => c.op === 'update-lease-status')) fail('a Pod CREATE wrote a lease status');
        if (v.decision.allowed) {
          if (gated(mutated, 'Pod') && stampOf(mutated) !== 0) report.gatedPods++;
          afterWrite((n) => n.pods.set(e.slot, mutated));
        }
        break;
      }
      case 'podungate': {
        const w = world();
        const old = existing(w.pods.get(e.slot), `Pod ${e.slot}`);
        if (!gated(old, 'Pod')) fail(`Pod ${e.slot} has no gate to lift`);
        const next = withGate(old, 'Pod', false);
        const d = await update(e, 'Pod', old, next, USERS[e.by]);
        if (d.allowed) {
          if (stampOf(old) !== 0 && !liveActive(w, stampOf(old)))
            fail(
              `the code let the gate of Pod ${e.slot} be lifted while lease ${stampOf(old)} is not Active`,
            );
          if (e.by === 'operator' || e.by === 'replica') report.ungates++;
          afterWrite((n) => n.pods.set(e.slot, next));
        }
        break;
      }
      case 'podadopt': {
        const w = world();
        const p = w.state.pods[e.slot] ?? fail(`no Pod slot ${e.slot}`);
        const old = existing(w.pods.get(e.slot), `Pod ${e.slot}`);
        const next = podObject(e.slot, { ...p, owned: true });
        const d = await update(e, 'Pod', old, next, USERS.replicaset);
        if (d.allowed) afterWrite((n) => n.pods.set(e.slot, next));
        break;
      }
      case 'rsadopt':
      case 'rsorphan': {
        const w = world();
        const old = existing(w.replicaSet, 'the ReplicaSet');
        const next = replicaSetObject(w.state.replicaSet, e.kind === 'rsadopt' ? e.d : 0);
        const d = await update(
          e,
          'ReplicaSet',
          old,
          next,
          e.kind === 'rsadopt' ? USERS.deployment : USERS.gc,
        );
        if (d.allowed)
          afterWrite((n) => {
            n.replicaSet = next;
          });
        break;
      }
      case 'deployupdate': {
        const w = world();
        const d = e.d === 1 || e.d === 2 ? e.d : fail(`no Deployment ${e.d}`);
        const s = w.state.deployments[d];
        const old = existing(w.deployments.get(d), `Deployment ${d}`);
        // A scale-up (more replicas than now: the model's replicas are "none" or "some"); an unmanaged
        // one also loses its template's gate.
        const next = deploymentObject(d, {
          ...s,
          replicas: s.replicas + 1,
          gate: s.stamp === 0 ? false : s.gate,
        });
        const decision = await update(e, 'Deployment', old, next, USERS.user);
        if (decision.allowed)
          afterWrite((n) => {
            n.deployments.set(d, next);
          });
        break;
      }
      case 'deploycreate': {
        const w = world();
        const d = e.d === 1 || e.d === 2 ? e.d : fail(`no Deployment ${e.d}`);
        const created = workload('Deployment', NAME, { uid: deploymentUID(d), replicas: 1 });
        const m = await review('mutate', 'Deployment', created, { username: USERS.user });
        expectVerdict(e, 'mutating', e.mutating, m.decision);
        if (!m.decision.allowed) break;
        const mutated = applyDecision(created, m.decision);
        if (stampOf(mutated) !== e.mstamp)
          fail(
            `the code's mutating webhook stamped for lease ${stampOf(mutated)}, the model for ${e.mstamp}`,
          );
        const v = await review('validate', 'Deployment', mutated, { username: USERS.user });
        expectVerdict(e, 'validating', e.validating, v.decision);
        const recorded = v.io.lease(NS, NAME);
        const target = recorded === undefined ? undefined : workloadOf(recorded).targetUID;
        const l = stampOf(mutated);
        if (v.decision.allowed && l !== 0 && target === deploymentUID(d)) {
          wrote = { l, d };
          report.recorded++;
        }
        if (v.decision.allowed) {
          // admission: a Deployment created while a lease targets its name is stamped for it and recorded.
          for (const live of w.leases.keys())
            if (l !== live || wrote?.l !== live)
              fail(
                `the code admitted Deployment ${d} while lease ${live} targets it, stamped for ${l}, recorded ${wrote?.d ?? 'nothing'}`,
              );
          afterWrite((n) => {
            n.deployments.set(d, mutated);
            if (wrote !== undefined && recorded !== undefined) n.leases.set(l as Incarnation, recorded);
          });
        }
        break;
      }
      default:
        // The environment: its effects are in the next state.
        break;
    }
  }
  return report;
}
