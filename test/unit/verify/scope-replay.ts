// The trace replay of scope.pml (docs/verification.md, "The scope replay"): every decision a trace of the
// model's random simulation makes about the opt-in admission scope goes through the real code, at the
// model's time (tick × SCOPE_TICK_MS on a ManualClock):
// - each operator replica's informer view: the namespace at each version it reaches, as the
//   label-selected informer delivers it (a watch event per version; a jump over versions is a relist,
//   diffRelist's events), into the real handlers of NamespaceScope (ScopeObservations, nextScopeEntry);
// - berthlease-scope and namespace-scope (decideScopeReview) with the serving replica's view and live
//   reads (a FakeIO holding the model's objects): a targeted BerthLease CREATE, the exit's removal (its
//   merge patch applied to the namespace as kube-apiserver would, after its resourceVersion precondition),
//   a user's removal, a user's enabled/leaving;
// - the exit controller's decision (decideScopeExit) on the leader's view;
// - the upgrade: ScopeMigration's plan of the validating configuration over a fake API answering its
//   LISTs with the model's objects, its clock read where the model reads it;
// - the reconciler's live GET before an activation (NamespaceScope.live) and the leader's cached view when
//   an Active lease stops for the scope;
// - whether each workload write reaches the Berth webhooks: the workload webhook's namespaceSelector, as
//   the code built or planned the configuration the apiserver shows, on the namespace as it shows it.
// The model supplies the environment (the label writes' and views' timing, the users, the controllers, the
// operator). The replay checks that the code decides what the model decided (admitted or denied, the
// exit's removal and its resourceVersion, every plan's write, which writes are reviewed; each replica's
// value, resourceVersion and since after every view step and at every state, and there whether settleLeft
// and berthlease-scope find it settled exactly when the model does) and the scope's invariant on
// the code's own outputs: while a targeted lease or a stamped object is in the namespace (scopeHolder's
// live LISTs), every workload write is reviewed, which the chain properties of admission.pml rest on (the
// admission replay covers the reviews themselves).
import type { KubernetesObject, V1ValidatingWebhook } from '@kubernetes/client-node';
import {
  GROUP,
  LEASE_SCOPE_WEBHOOK,
  MANAGED_UID,
  NAMESPACE_SCOPE_WEBHOOK,
  PLURAL,
  SCOPE_ENABLED,
  SCOPE_LABEL,
  SCOPE_LEAVING,
  SCOPE_SETTLE_MS,
  VERSION,
} from '../../../src/berth/api.ts';
import { NamespaceScope, ScopeObservations } from '../../../src/berth/namespace-scope.ts';
import { resourcePath } from '../../../src/kube/client.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import { matchesLabelSelector, matchesLabels, parseLabelSelector } from '../../../src/kube/labels.ts';
import { diffRelist } from '../../../src/kube/relist.ts';
import type { KubeRequester, RawRequest, RawResponse } from '../../../src/kube/transport.ts';
import { type JsonObject, KINDS, type WorkloadKind } from '../../../src/workloads/model.ts';
import type { ScopeEvent, ScopeState, ScopeValue } from '../../../verify/scope-trace.ts';
import { validatingWebhookConfiguration } from '../../../webhooks/configurations.ts';
import { type AdmissionRequest, admissionRequestSchema, type Decision } from '../../../webhooks/review.ts';
import {
  decideLeaseScope,
  decideScopeReview,
  STAMPED_KINDS,
  scopeHolder,
  settleLeft,
} from '../../../webhooks/scope.ts';
import { decideScopeExit, scopeRemovalPatch } from '../../../webhooks/scope-exit.ts';
import { ScopeMigration, selectsScope } from '../../../webhooks/scope-migration.ts';
import { FakeIO } from '../../fixtures/webhooks/fake-io.ts';
import { berthLease, NS, OPERATOR_USER, stamped, USER, workload } from '../../fixtures/webhooks/objects.ts';

const NAME = 'web';
const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
const PARAMS = { namespace: 'berth-system' } as const;
/** The validating configuration as built (narrowed, with the guards), and the registration before the scope. */
const OPT_IN = validatingWebhookConfiguration({ ...PARAMS, scope: 'opt-in' }).webhooks ?? [];
const CLUSTER_WIDE = validatingWebhookConfiguration({ ...PARAMS, scope: 'all' }).webhooks ?? [];
const GUARDS = new Set([LEASE_SCOPE_WEBHOOK, NAMESPACE_SCOPE_WEBHOOK]);
const LEASE_KIND = { group: GROUP, version: VERSION, kind: 'BerthLease', resource: PLURAL };
const NAMESPACE_KIND = { group: '', version: 'v1', kind: 'Namespace', resource: 'namespaces' };
const binding = { name: NAME, uid: 'lease-uid-1', targetUID: '' };

const isRecord = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const record = (v: unknown): JsonObject => (isRecord(v) ? v : {});

const LABEL: Record<ScopeValue, string | undefined> = {
  none: undefined,
  enabled: SCOPE_ENABLED,
  leaving: SCOPE_LEAVING,
};

/** The namespace at (absolute) version v with `value`: resourceVersion v + 1. */
function namespaceAt(v: number, value: ScopeValue): JsonObject {
  const label = LABEL[value];
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name: NS,
      resourceVersion: String(v + 1),
      labels: { 'kubernetes.io/metadata.name': NS, ...(label === undefined ? {} : { [SCOPE_LABEL]: label }) },
    },
  };
}
const labelsOf = (o: JsonObject): Record<string, string> =>
  record(record(o.metadata).labels) as Record<string, string>;
const rvOf = (o: JsonObject): string => String(record(o.metadata).resourceVersion ?? '');

/** RFC 7386: what kube-apiserver makes of a merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return patch;
  const out: JsonObject = isRecord(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function review(
  kind: typeof LEASE_KIND | typeof NAMESPACE_KIND,
  operation: 'CREATE' | 'UPDATE',
  object: JsonObject,
  o: { old?: JsonObject; namespace?: string; name: string; username: string },
): AdmissionRequest {
  const { resource, ...gvk } = kind;
  return admissionRequestSchema.parse({
    uid: 'replay',
    kind: gvk,
    resource: { group: kind.group, version: kind.version, resource },
    ...(o.namespace === undefined ? {} : { namespace: o.namespace }),
    name: o.name,
    operation,
    userInfo: { username: o.username },
    object,
    oldObject: o.old ?? null,
  });
}

const hasWebhook = (webhooks: readonly V1ValidatingWebhook[], name: string): boolean =>
  webhooks.some((w) => w.name === name);

/** Whether a workload write reaches the Berth webhooks: the workload webhook selects the namespace. */
const reviews = (webhooks: readonly V1ValidatingWebhook[], ns: JsonObject): boolean =>
  webhooks
    .filter((w) => !GUARDS.has(w.name))
    .some((w) => matchesLabelSelector(w.namespaceSelector, labelsOf(ns)));

// ---- the model's objects ----

const targetedLease = (): JsonObject =>
  berthLease(NAME, { uid: binding.uid, target: { kind: 'Deployment', name: NAME } });
const stampedObject = (kind: WorkloadKind, name: string): JsonObject =>
  stamped(kind, workload(kind, name), binding);

/** The stamped kinds the state holds, with their names. */
function stampedIn(s: ScopeState): [WorkloadKind, string][] {
  const out: [WorkloadKind, string][] = [];
  if (s.deployment.exists && s.deployment.stamped) out.push(['Deployment', NAME]);
  if (s.replicaSet.exists && s.replicaSet.stamped) out.push(['ReplicaSet', `${NAME}-abc`]);
  for (const [k, p] of s.pods.entries()) if (p.exists && p.stamped) out.push(['Pod', `${NAME}-abc-${k}`]);
  return out;
}

function ioOf(s: ScopeState): FakeIO {
  const io = new FakeIO();
  if (s.lease) io.addLease(targetedLease());
  for (const [kind, name] of stampedIn(s)) io.addWorkload(kind, stampedObject(kind, name));
  return io;
}

const answer = (body: unknown): RawResponse => ({
  status: 200,
  headers: {},
  text: async () => JSON.stringify(body),
  stream: () => null,
});

/** The API ScopeMigration's plan reads and writes, as of the state its LISTs see; answers once `gate` is open. */
class PlanApi implements KubeRequester {
  readonly patches: string[] = [];
  readonly #state: ScopeState;
  readonly #namespace: JsonObject;
  readonly #gate: Promise<void>;
  constructor(state: ScopeState, namespace: JsonObject, gate: Promise<void>) {
    this.#state = state;
    this.#namespace = namespace;
    this.#gate = gate;
  }

  async request(req: RawRequest): Promise<RawResponse> {
    await this.#gate;
    const s = this.#state;
    if (req.method === 'PATCH') {
      this.patches.push(req.path);
      return answer(mergePatch(this.#namespace, req.body));
    }
    if (req.path === resourcePath({ group: GROUP, version: VERSION, plural: PLURAL }))
      return answer({ items: s.lease ? [targetedLease()] : [] });
    if (req.path === resourcePath({ version: 'v1', plural: 'namespaces' })) {
      const selector = parseLabelSelector(String(req.query?.labelSelector ?? ''));
      return answer({ items: matchesLabels(selector, labelsOf(this.#namespace)) ? [this.#namespace] : [] });
    }
    for (const kind of STAMPED_KINDS)
      if (req.path === resourcePath(KINDS[kind]) && req.query?.labelSelector === MANAGED_UID)
        return answer({
          items: stampedIn(s)
            .filter(([k]) => k === kind)
            .map(([k, name]) => stampedObject(k, name)),
        });
    throw new Error(`the plan asked for ${req.method ?? 'GET'} ${req.path}, which the replay does not serve`);
  }
}

// ---- the replay ----

export interface ScopeReplayOptions {
  /** SCOPE_TICK_MS of the profile the trace was simulated with. */
  tickMs: number;
}

export interface ScopeReplayReport {
  events: number;
  /** The code's decisions by kind: [yes, no] (admitted/denied, reviewed/unreviewed, ...). */
  decisions: Record<string, [number, number]>;
  /** The guards' denials by webhook and reason. */
  denials: Record<string, number>;
  /** Plans whose labelling was not compared: the model's window had no version left for a label. */
  uncompared: number;
}

/** A mismatch between the model and the code, or a broken invariant, with the events before it. */
export class ScopeReplayError extends Error {
  constructor(message: string, events: readonly ScopeEvent[], at: number) {
    const context = events
      .slice(0, at + 1)
      .filter((e, i) => (e.kind !== 'state' && e.kind !== 'tick') || i === at)
      .slice(-14)
      .map((e, i, all) => `${i === all.length - 1 ? '>' : ' '} ${e.line}`)
      .join('\n');
    super(`event ${at} (${events[at]?.line ?? 'end'}): ${message}\n${context}`);
    this.name = 'ScopeReplayError';
  }
}

interface Replica {
  /** The absolute version its informer shows. */
  shows: number;
  /** The informer's cache of the namespace (label-selected: absent while out of scope). */
  cached: KubernetesObject | undefined;
  seen: ScopeObservations;
}

const said = (d: Decision): string => (d.allowed ? 'allowed' : `denied (${d.reason}: ${d.message})`);
const verdict = (yes: boolean): string => (yes ? 'admitted' : 'denied');

/** Replays one trace; throws ScopeReplayError at the first disagreement or broken invariant. */
export async function replayScope(
  events: readonly ScopeEvent[],
  o: ScopeReplayOptions,
): Promise<ScopeReplayReport> {
  const report: ScopeReplayReport = { events: 0, decisions: {}, denials: {}, uncompared: 0 };
  let at = 0;
  const fail: (message: string) => never = (message) => {
    throw new ScopeReplayError(message, events, at);
  };
  const count = (key: string, yes: boolean): void => {
    const [y, n] = report.decisions[key] ?? [0, 0];
    report.decisions[key] = yes ? [y + 1, n] : [y, n + 1];
  };
  const denied = (webhook: string, d: Decision): void => {
    if (d.allowed) return;
    const key = `${webhook} ${d.reason}`;
    report.denials[key] = (report.denials[key] ?? 0) + 1;
  };

  const init = events[0];
  if (init?.kind !== 'init') throw new ScopeReplayError('the trace does not start with init', events, 0);
  if (init.settle * o.tickMs !== SCOPE_SETTLE_MS)
    fail(
      `the model's settle period is ${init.settle} ticks of ${o.tickMs} ms, the code's ${SCOPE_SETTLE_MS} ms`,
    );
  // Every replica has listed the namespace and shown its first value for (at least) the settle period.
  const clock = new ManualClock(T0 - SCOPE_SETTLE_MS);
  const now = (): number => clock.now();
  const ticks = (ms: number): number => Math.min(init.settle, Math.floor(ms / o.tickMs));

  // The label's versions (absolute), the model's window offset, the views.
  const values: ScopeValue[] = [init.value];
  let offset = 0;
  const abs = (v: number): number => v + offset;
  const stored = (): number => values.length - 1;
  const nsAt = (v: number): JsonObject => namespaceAt(v, values[v] ?? fail(`no version ${v}`));
  const apiservers = Array.from({ length: init.na }, () => 0);
  const replicas: Replica[] = Array.from({ length: init.nr }, () => {
    const r: Replica = { shows: 0, cached: undefined, seen: new ScopeObservations(now, () => true) };
    if (values[0] !== 'none') {
      r.cached = nsAt(0);
      r.seen.handlers.onAdd?.(r.cached);
    }
    return r;
  });
  clock.advance(SCOPE_SETTLE_MS);

  // The configurations: what each version holds (0 the registration before the scope; 1 and 2 as the
  // code planned them), the one written and each apiserver's view.
  const configs = new Map<number, V1ValidatingWebhook[]>(init.upgrade ? [[0, CLUSTER_WIDE]] : [[2, OPT_IN]]);
  let cver = init.upgrade ? 0 : 2;
  const cviews = Array.from({ length: init.na }, () => cver);
  const configOf = (a: number): V1ValidatingWebhook[] =>
    configs.get(cviews[a] ?? -1) ?? fail(`apiserver ${a} shows configuration ${cviews[a]}, never written`);

  let state: ScopeState | undefined;
  const current = (): ScopeState => state ?? fail('a decision before the first state');
  const holder = (): Promise<string | undefined> => scopeHolder(ioOf(current()), NS);

  // The exit's patch in flight (its resourceVersion precondition), the upgrade's plan in flight.
  let exitPatch: JsonObject | undefined;
  let exitAdmitted = false;
  let planApi: PlanApi | undefined;
  let plan:
    | {
        promise: Promise<{ webhooks: V1ValidatingWebhook[] }>;
        release: () => void;
        api: PlanApi;
        live: V1ValidatingWebhook[];
        labelled: boolean;
        full: boolean;
        tick: number;
      }
    | undefined;
  let pendingConfig: { c: number; webhooks: V1ValidatingWebhook[] } | undefined;
  let tick = 0;
  /** The label write the last decision admitted, which the model prints next. */
  let expectLabel: { by: 'user' | 'exit' | 'upgrade'; value: ScopeValue } | undefined;
  const migration = new ScopeMigration({
    transport: { request: (req) => (planApi ?? fail('a plan request outside a plan')).request(req) },
    scope: replicas[0]!.seen,
    clock,
  });
  const liveScope = new NamespaceScope({
    transport: { request: async () => answer(nsAt(stored())) },
    clock,
  });

  /**
   * The code's view of replica r against the model's: value, resourceVersion, ticks shown (sa); and the
   * guards' settle decisions on it, at every view step and state, not only where the model acts: settled
   * (settleLeft 0) exactly when the model's SETTLED, a targeted BerthLease admitted exactly when ENTRY_OK.
   */
  const compareView = (r: number, sa: number): void => {
    const replica = replicas[r] ?? fail(`no replica ${r}`);
    const entry = replica.seen.entry(NS);
    const value = values[replica.shows]!;
    if (value === 'none') {
      if (entry !== 'out')
        fail(`replica ${r} shows the label removed, the code's entry is ${JSON.stringify(entry)}`);
      return;
    }
    if (entry === 'out' || entry === undefined || entry.value !== LABEL[value])
      fail(`replica ${r} shows ${value}, the code's entry is ${JSON.stringify(entry)}`);
    if (entry.resourceVersion !== rvOf(nsAt(replica.shows)))
      fail(
        `replica ${r} shows version ${replica.shows}, the code's entry has resourceVersion ${entry.resourceVersion}`,
      );
    const shown = ticks(now() - entry.since);
    if (shown !== sa)
      fail(
        `replica ${r} has shown ${value} for ${sa} ticks in the model, ${shown} by the code's since (${entry.since - T0} ms)`,
      );
    const settled = sa >= init.settle;
    const left = settleLeft(entry, entry.value, now());
    if ((left === 0) !== settled)
      fail(
        `replica ${r}: settleLeft ${left} ms after ${sa} ticks, the model ${settled ? 'settled' : 'settling'}`,
      );
    const d = decideLeaseScope(NS, entry, now());
    if (d.allowed !== (settled && value === 'enabled'))
      fail(`berthlease-scope on replica ${r} would have ${said(d)} (${value} for ${sa} ticks)`);
  };

  /** Replica r's informer reaches version w: a watch event, or a relist when it jumps over versions. */
  const see = (r: Replica, w: number): boolean => {
    const relist = w > r.shows + 1;
    const next: KubernetesObject | undefined = values[w] === 'none' ? undefined : nsAt(w);
    const h = r.seen.handlers;
    if (relist) {
      const diff = diffRelist(
        new Map(r.cached === undefined ? [] : [[NS, r.cached]]),
        new Map(next === undefined ? [] : [[NS, next]]),
      );
      for (const gone of diff.deleted) h.onDelete?.(gone, true);
      for (const [old, obj] of diff.updated) h.onUpdate?.(old, obj, true);
      for (const obj of diff.added) h.onAdd?.(obj);
    } else if (next !== undefined) {
      if (r.cached === undefined) h.onAdd?.(next);
      else h.onUpdate?.(r.cached, next, false);
    } else if (r.cached !== undefined) h.onDelete?.(r.cached, false);
    r.cached = next;
    r.shows = w;
    return relist;
  };

  for (; at < events.length; at++) {
    const e = events[at]!;
    report.events++;
    if (expectLabel !== undefined && e.kind !== 'label')
      fail(`the ${expectLabel.by}'s label write is missing`);
    switch (e.kind) {
      case 'init':
        if (at !== 0) fail('init again');
        break;
      case 'tick':
        if (plan !== undefined) fail('time passes between a plan and its clock read');
        tick++;
        clock.advance(o.tickMs);
        break;
      case 'shift':
        offset += e.n;
        if ([...apiservers, ...replicas.map((r) => r.shows)].some((v) => v < offset))
          fail('the model forgot a version a view still shows');
        break;
      case 'label': {
        if (abs(e.v) !== values.length) fail(`version ${abs(e.v)} written after ${stored()}`);
        if (e.by !== expectLabel?.by || e.value !== expectLabel.value)
          fail(`a label write of ${e.value} by the ${e.by}, admitted: ${JSON.stringify(expectLabel)}`);
        values.push(e.value);
        expectLabel = undefined;
        break;
      }
      case 'replica': {
        const replica = replicas[e.r] ?? fail(`no replica ${e.r}`);
        if (abs(e.from) !== replica.shows)
          fail(`replica ${e.r} moves from ${abs(e.from)}, it shows ${replica.shows}`);
        const w = abs(e.v);
        if (w <= replica.shows || w > stored() || values[w] !== e.value)
          fail(`replica ${e.r} sees version ${w} (${e.value}), the label has ${values[w]}`);
        count('informer: relist (else a watch event)', see(replica, w));
        compareView(e.r, e.sa);
        break;
      }
      case 'apiserver': {
        const w = abs(e.v);
        if (w <= (apiservers[e.a] ?? 0) || w > stored() || values[w] !== e.value)
          fail(`apiserver ${e.a} sees version ${w} (${e.value}), the label has ${values[w]}`);
        apiservers[e.a] = w;
        break;
      }
      case 'config':
        if (e.c !== cver) fail(`apiserver ${e.a} sees configuration ${e.c}, ${cver} is written`);
        cviews[e.a] = e.c;
        break;
      case 'configwrite': {
        if (pendingConfig?.c !== e.c)
          fail(`configuration ${e.c} written, the code planned ${pendingConfig?.c}`);
        configs.set(e.c, pendingConfig.webhooks);
        cver = e.c;
        pendingConfig = undefined;
        break;
      }
      case 'state': {
        const s = e.state;
        state = s;
        if (abs(s.ver) !== stored()) fail(`the stored version is ${abs(s.ver)}, the replay's ${stored()}`);
        for (let a = 0; a < init.na; a++)
          if (abs(s.nv[a]!) !== apiservers[a])
            fail(`apiserver ${a} shows ${abs(s.nv[a]!)}, the replay's ${apiservers[a]}`);
        if (s.cver !== cver || s.cv.slice(0, init.na).some((c, a) => c !== cviews[a]))
          fail(`configurations ${s.cver} ${s.cv}, the replay's ${cver} ${cviews}`);
        for (let r = 0; r < init.nr; r++) {
          if (abs(s.ri[r]!) !== replicas[r]!.shows)
            fail(`replica ${r} shows ${abs(s.ri[r]!)}, the replay's ${replicas[r]!.shows}`);
          compareView(r, s.sa[r]!);
        }
        break;
      }
      case 'leasecreate': {
        const guarded = hasWebhook(configOf(e.a), LEASE_SCOPE_WEBHOOK);
        if (guarded !== e.guarded)
          fail(
            `berthlease-scope ${guarded ? 'is' : 'is not'} in apiserver ${e.a}'s configuration, the model says the opposite`,
          );
        if (!guarded) {
          if (!e.admitted) fail('a BerthLease denied without its guard');
          break;
        }
        const replica = replicas[e.r] ?? fail(`no replica ${e.r}`);
        const d = await decideScopeReview(
          review(LEASE_KIND, 'CREATE', targetedLease(), { namespace: NS, name: NAME, username: USER }),
          { io: ioOf(current()), scope: replica.seen, operatorUser: OPERATOR_USER, now },
        );
        if (d.allowed !== e.admitted)
          fail(`berthlease-scope on replica ${e.r}: the code ${said(d)}, the model ${verdict(e.admitted)}`);
        count('berthlease-scope: a targeted BerthLease admitted', d.allowed);
        denied('berthlease-scope', d);
        break;
      }
      case 'exitcheck': {
        const leader = replicas[0]!;
        if (abs(e.v) !== leader.shows)
          fail(`the exit saw version ${abs(e.v)}, the leader shows ${leader.shows}`);
        const step = await decideScopeExit(leader.seen.entry(NS), now(), holder);
        if (step.kind !== 'remove')
          fail(`the exit controller decides ${JSON.stringify(step)}, the model removes the label`);
        if (step.resourceVersion !== rvOf(nsAt(leader.shows)))
          fail(
            `the exit's patch carries resourceVersion ${step.resourceVersion}, the leader saw ${rvOf(nsAt(leader.shows))}`,
          );
        count('exit: the removal attempted', true);
        exitPatch = scopeRemovalPatch(step.resourceVersion);
        break;
      }
      case 'exitpatch': {
        const patch = exitPatch ?? fail('a removal patch the exit controller never decided');
        const old = nsAt(stored());
        const patched = record(mergePatch(old, patch));
        // kube-apiserver's precondition: a resourceVersion in the patch must be the stored one (else 409).
        const precondition = record(patch.metadata).resourceVersion;
        const conflict = precondition !== undefined && precondition !== rvOf(old);
        if (conflict !== (e.outcome === 'conflict'))
          fail(
            `the patch's resourceVersion precondition ${JSON.stringify(precondition)} against the stored ${rvOf(old)}: the model's outcome ${e.outcome}`,
          );
        count('exit: the patch past its resourceVersion (else 409)', !conflict);
        if (conflict) {
          exitPatch = undefined;
          break;
        }
        const guarded = hasWebhook(configOf(e.a), NAMESPACE_SCOPE_WEBHOOK);
        if (guarded !== e.guarded)
          fail(
            `namespace-scope ${guarded ? 'is' : 'is not'} in apiserver ${e.a}'s configuration, the model says the opposite`,
          );
        let allowed = true;
        if (guarded) {
          const replica = replicas[e.r] ?? fail(`no replica ${e.r}`);
          const d = await decideScopeReview(
            review(NAMESPACE_KIND, 'UPDATE', patched, { old, name: NS, username: OPERATOR_USER }),
            { io: ioOf(current()), scope: replica.seen, operatorUser: OPERATOR_USER, now },
          );
          allowed = d.allowed;
          if (allowed !== (e.outcome !== 'denied'))
            fail(
              `namespace-scope on the exit's removal, replica ${e.r}: the code ${said(d)}, the model ${e.outcome}`,
            );
          count("namespace-scope: the exit's removal admitted", allowed);
          denied('namespace-scope', d);
        }
        const unchanged = labelsOf(patched)[SCOPE_LABEL] === labelsOf(old)[SCOPE_LABEL];
        if (allowed && unchanged !== (e.outcome === 'unchanged'))
          fail(
            `the removal ${unchanged ? 'changes nothing' : 'removes the label'}, the model's outcome ${e.outcome}`,
          );
        exitAdmitted = allowed && !unchanged;
        if (!exitAdmitted) exitPatch = undefined;
        break;
      }
      case 'exitwrite':
        if (!exitAdmitted) fail('the exit writes a removal nothing admitted');
        exitAdmitted = false;
        if (e.written) {
          exitPatch = undefined;
          expectLabel = { by: 'exit', value: 'none' };
        }
        break;
      case 'userset': {
        const old = nsAt(stored());
        const next = namespaceAt(stored() + 1, e.value);
        const d = await decideScopeReview(
          review(NAMESPACE_KIND, 'UPDATE', next, { old, name: NS, username: USER }),
          { io: ioOf(current()), scope: replicas[0]!.seen, operatorUser: OPERATOR_USER, now },
        );
        if (!d.allowed)
          fail(`namespace-scope on a user's ${e.value}: the code ${said(d)}, the model admitted`);
        count('namespace-scope: a user sets enabled or leaving', d.allowed);
        expectLabel = { by: 'user', value: e.value };
        break;
      }
      case 'userremove': {
        const guarded = hasWebhook(configOf(e.a), NAMESPACE_SCOPE_WEBHOOK);
        if (guarded !== e.guarded)
          fail(
            `namespace-scope ${guarded ? 'is' : 'is not'} in apiserver ${e.a}'s configuration, the model says the opposite`,
          );
        if (guarded) {
          const old = nsAt(stored());
          const d = await decideScopeReview(
            review(NAMESPACE_KIND, 'UPDATE', namespaceAt(stored() + 1, 'none'), {
              old,
              name: NS,
              username: USER,
            }),
            { io: ioOf(current()), scope: replicas[0]!.seen, operatorUser: OPERATOR_USER, now },
          );
          if (d.allowed !== e.admitted)
            fail(
              `namespace-scope on a user's removal: the code ${said(d)}, the model ${verdict(e.admitted)}`,
            );
          count("namespace-scope: a user's removal admitted", d.allowed);
          denied('namespace-scope', d);
        } else if (!e.admitted) fail("a user's removal denied without namespace-scope");
        count("a user's removal reviewed (else no guard yet)", guarded);
        if (e.admitted) expectLabel = { by: 'user', value: 'none' };
        break;
      }
      case 'plan': {
        if (plan !== undefined || pendingConfig !== undefined)
          fail('a plan while another or its write is in flight');
        let release: () => void = () => undefined;
        const gate = new Promise<void>((resolve) => {
          release = resolve;
        });
        const live = configs.get(cver) ?? fail(`configuration ${cver} never written`);
        // The plan reads its clock now and sends its LISTs, answered as of now once the model decides.
        const api = new PlanApi(current(), nsAt(stored()), gate);
        planApi = api;
        const promise = migration.plan({ live, want: OPT_IN });
        plan = { promise, release, api, live, labelled: e.labelled, full: e.full, tick };
        if (e.labelled) expectLabel = { by: 'upgrade', value: 'enabled' };
        break;
      }
      case 'planclock': {
        const p = plan ?? fail('a plan decision without its LISTs');
        if (p.tick !== tick) fail('the plan decides in another tick than its LISTs');
        p.release();
        const { webhooks } = await p.promise;
        plan = undefined;
        planApi = undefined;
        const labelled = p.api.patches.length > 0;
        if (!p.full && labelled !== p.labelled)
          fail(
            `the plan ${labelled ? 'labels' : 'does not label'} the holder's namespace, the model ${p.labelled ? 'does' : 'does not'}`,
          );
        if (p.full) report.uncompared++;
        const narrows = webhooks.some((w) => selectsScope(w.namespaceSelector));
        const writes = narrows
          ? 'narrow'
          : JSON.stringify(webhooks) !== JSON.stringify(p.live)
            ? 'guards'
            : 'nothing';
        if (writes === 'guards' && ![...GUARDS].every((g) => hasWebhook(webhooks, g)))
          fail('the plan writes a cluster-wide configuration without the guards');
        if (writes !== e.writes) fail(`the plan writes ${writes}, the model ${e.writes}`);
        count('upgrade: the plan narrows', writes === 'narrow');
        count('upgrade: the plan writes the guards', writes === 'guards');
        if (writes !== 'nothing') pendingConfig = { c: writes === 'narrow' ? 2 : 1, webhooks };
        break;
      }
      case 'activate': {
        const inScope = await liveScope.live(NS);
        if (!inScope) fail('the lease is activated while a live GET shows the namespace out of scope');
        count('reconciler: the live GET before an activation in scope', inScope);
        break;
      }
      case 'stopping':
        if (!e.deleted && !e.lost) {
          const entry = replicas[0]!.seen.entry(NS);
          if (entry !== 'out')
            fail(
              `an Active lease stops for the scope while the leader's informer shows ${JSON.stringify(entry)}`,
            );
          count("reconciler: an Active lease stopped as the leader's informer shows the namespace out", true);
        }
        break;
      case 'write': {
        const reviewed = reviews(configOf(e.a), nsAt(apiservers[e.a]!));
        if (reviewed !== e.reviewed)
          fail(
            `a ${e.what} write at apiserver ${e.a}: the code's configuration ${reviewed ? 'reviews' : 'does not review'} it, the model ${e.reviewed ? 'does' : 'does not'}`,
          );
        count('workload write reviewed', reviewed);
        if (!reviewed) {
          const managed = await holder();
          if (managed !== undefined)
            fail(`a ${e.what} write at apiserver ${e.a} is not reviewed while ${managed}`);
        }
        break;
      }
      default:
        // The environment: the lease written, registrations, the drain, the other cluster, a lost deadline.
        break;
    }
  }
  if (plan !== undefined) plan.release();
  return report;
}
