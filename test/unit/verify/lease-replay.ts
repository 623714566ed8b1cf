// The trace replay of lease.pml (docs/verification.md, "Trace replay"): a trace of the model's random
// simulation drives the real BerthLeaseReconciler and ManagedWorkloads of two clusters (the unit fakes
// for the Kubernetes API, a ManualClock per cluster set to the model's time plus the cluster's clock
// offset) and the real central LeaseManager (memory store, its own clock). The model supplies only the
// environment: when a reconcile starts, when a request reaches the server, when an answer arrives or a
// call fails, Pods created by the ReplicaSet controller and their containers ending, crashes and
// deletions. The code decides everything else, and the replay checks (1) that it decides what the model
// decided (the central call, the requeue, the recorded token and deadline, Pod deletion and ungating)
// and (2) the model's invariants on the code's own state: never an ungated Pod in both clusters, a Pod
// ungated only once registered, tokens never going backwards.

import { type BerthLeaseSpec, SCHEDULING_GATE } from '../../../src/berth/api.ts';
import { LeaseScope } from '../../../src/berth/lease-scope.ts';
import type { AcquireResult, LeaseCallOptions, LeaseClient } from '../../../src/berth/leaseclient.ts';
import { LeaseClientError, LeaseConflictError } from '../../../src/berth/leaseclient.ts';
import { ManagedWorkloads } from '../../../src/berth/managed-workloads.ts';
import { activeAt } from '../../../src/berth/ownership.ts';
import { permitPods } from '../../../src/berth/permit.ts';
import { BerthLeaseReconciler } from '../../../src/berth/reconciler.ts';
import { formatTime } from '../../../src/berth/status.ts';
import type { DeleteOutcome } from '../../../src/berth/workload-io.ts';
import { LeaseManager, ReleaseConflictError } from '../../../src/central/manager.ts';
import { MemoryStore } from '../../../src/central/memstore.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import type { ReconcileResult } from '../../../src/kube/controller.ts';
import type { KubeRequester } from '../../../src/kube/transport.ts';
import type { WorkloadKind } from '../../../src/workloads/model.ts';
import type { CallKind, Cluster, LeaseEvent } from '../../../verify/trace.ts';
import { ctx, FakeLeaseStore, NS } from '../berth/fakes.ts';
import { deployment, LEASE_UID, pod, replicaSet, T0, TARGET_UID } from '../berth/managed-fixtures.ts';
import { FakeWorkloadApi } from '../berth/workload-fakes.ts';

const NAME = 'web';
const KEY = `${NS}/${NAME}`;
const HOLDERS = ['cluster-a', 'cluster-b'] as const;

/** The spec of the CI profile (verify/constants.ts PROFILES[0]). */
export const replaySpec = (ttlSeconds: number, heartbeatSeconds: number): BerthLeaseSpec => ({
  leaseName: NAME,
  holderIdentity: 'h',
  ttlSeconds,
  heartbeatIntervalSeconds: heartbeatSeconds,
  semantics: 'at-most-once',
  target: { apiVersion: 'apps/v1', kind: 'Deployment', name: NAME },
  acquireAction: { scale: { replicas: 1 } },
  releaseAction: { scale: { replicas: 0 } },
});

/**
 * A deleted Pod keeps running (deletionTimestamp set) until the model says its containers are gone; the
 * grace the code gave its DELETE is kept.
 */
class TerminatingWorkloadApi extends FakeWorkloadApi {
  /** Pod name -> the gracePeriodSeconds of the code's DELETE of the running Pod. */
  readonly podGrace = new Map<string, number | undefined>();

  override async delete(
    kind: WorkloadKind,
    namespace: string,
    name: string,
    uid: string,
    signal?: AbortSignal,
    gracePeriodSeconds?: number,
  ): Promise<DeleteOutcome> {
    const current = this.objects.get(`${kind}/${name}`);
    const gated = (current?.spec?.schedulingGates ?? []).some((g) => g.name === SCHEDULING_GATE);
    if (kind !== 'Pod' || current === undefined || current.metadata.uid !== uid || gated)
      return super.delete(kind, namespace, name, uid, signal, gracePeriodSeconds);
    this.calls.push(`delete ${kind}/${name}`);
    current.metadata.deletionTimestamp ??= '2026-09-07T09:00:00Z';
    if (!this.podGrace.has(name)) this.podGrace.set(name, gracePeriodSeconds);
    return 'deleted';
  }

  /** The Pod's containers are gone: the object goes. */
  remove(name: string): void {
    this.objects.delete(`Pod/${name}`);
  }
}

interface Pending {
  kind: CallKind;
  fencingToken: number;
  resolve(v: AcquireResult | undefined): void;
  reject(e: Error): void;
  /** The model's send time of this call's request. */
  id?: number;
}

/** The central API as one cluster's reconciler sees it: every call waits for the trace. */
class ReplayLeaseClient implements LeaseClient {
  pending: Pending | undefined;

  acquire(
    _ns: string,
    _name: string,
    _holder: string,
    _ttl: number,
    _o?: LeaseCallOptions,
  ): Promise<AcquireResult> {
    return new Promise<AcquireResult | undefined>((resolve, reject) => {
      this.pending = { kind: 'acquire', fencingToken: 0, resolve, reject };
    }).then((v) => {
      if (v === undefined) throw new Error('no acquire answer');
      return v;
    });
  }

  async renew(): Promise<AcquireResult> {
    throw new Error('the reconciler never calls Renew');
  }

  release(
    _ns: string,
    _name: string,
    _holder: string,
    fencingToken: number,
    _o?: LeaseCallOptions,
  ): Promise<void> {
    return new Promise<AcquireResult | undefined>((resolve, reject) => {
      this.pending = { kind: 'release', fencingToken, resolve, reject };
    }).then(() => undefined);
  }
}

/** A mismatch between the model and the code, or a broken invariant, with where it happened. */
export class ReplayError extends Error {
  constructor(message: string, events: readonly LeaseEvent[], at: number) {
    const context = events
      .slice(Math.max(0, at - 12), at + 1)
      .map((e, i, all) => `${i === all.length - 1 ? '>' : ' '} ${JSON.stringify(e)}`)
      .join('\n');
    super(`${message}\n${context}`);
    this.name = 'ReplayError';
  }
}

const noTransport: KubeRequester = {
  request: () => Promise.reject(new Error('no API server in the replay')),
};

/** Lets every promise chain of the fakes run (they resolve in microtasks only). */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 3; i++) await new Promise<void>((r) => setImmediate(r));
};

interface Side {
  c: Cluster;
  off: number;
  clock: ManualClock;
  store: FakeLeaseStore;
  api: TerminatingWorkloadApi;
  client: ReplayLeaseClient;
  reconciler: BerthLeaseReconciler | undefined;
  /** The reconcile in progress (or settled, until its `done` is checked). */
  run: { result?: ReconcileResult; error?: unknown; settled: boolean } | undefined;
  /** The answer the server gave to the current call, waiting for its delivery. */
  answer: { value?: AcquireResult; conflict?: boolean } | undefined;
  podName: string | undefined;
  pods: number;
  lastToken: number;
  ungated: Set<string>;
  /** Lenient replays: when the code's deletion of the current Pod was first seen (model ticks). */
  deletedAt: number | undefined;
}

export interface ReplayOptions {
  ttlSeconds: number;
  heartbeatSeconds: number;
  /** The operator's `--stop-lead` (the profile's, verify/constants.ts). */
  stopLeadMs: number;
  /** The model's tick (verify/constants.pml TICK_MS). */
  tickMs: number;
  /**
   * Strict (default): the code must decide what the model decided. Lenient: only the environment is taken
   * from the trace (a counterexample of a switched model, whose own decisions the code does not share),
   * and only the invariants are checked.
   */
  strict?: boolean;
  /**
   * Lenient replays: a Pod the code deleted is gone this many ticks later (the model's T_TERM), or when
   * the grace the code gave it ends, whichever is first.
   */
  termTicks?: number;
  /** Told the code's state after each event (debugging a replay). */
  log?: (line: string) => void;
}

export interface ReplayReport {
  events: number;
  reconciles: number;
  ungates: number;
  /** Deletions of a running Pod whose grace the code gave as the model bounds it (GRACE). */
  graces: number;
  /** Events of the trace the code did not follow (lenient replays only). */
  skipped: number;
}

/** Replays one trace; throws ReplayError on the first disagreement or broken invariant. */
export async function replayLease(
  events: readonly LeaseEvent[],
  options: ReplayOptions,
): Promise<ReplayReport> {
  const spec = replaySpec(options.ttlSeconds, options.heartbeatSeconds);
  const TICK_MS = options.tickMs;
  const centralClock = new ManualClock(T0);
  const centralStore = new MemoryStore();
  const central = new LeaseManager({ store: centralStore, clock: centralClock });
  const requests = new Map<string, { c: Cluster; kind: CallKind; fencingToken: number }>();
  let centralToken = 0;
  const strict = options.strict ?? true;
  const report: ReplayReport = { events: 0, reconciles: 0, ungates: 0, graces: 0, skipped: 0 };
  const skip = (): void => {
    report.skipped++;
  };
  let at = 0;
  const fail = (message: string): never => {
    throw new ReplayError(message, events, at);
  };

  const newReconciler = (s: Side): BerthLeaseReconciler => {
    const workloads = new ManagedWorkloads({
      transport: noTransport,
      operatorNamespace: 'berth-system',
      api: s.api,
      leases: s.store,
      clock: s.clock,
      stopLeadMs: options.stopLeadMs,
    });
    return new BerthLeaseReconciler({
      api: s.store,
      leaseClient: s.client,
      clusterIdentity: HOLDERS[s.c],
      operatorNamespace: 'berth-system',
      workloads,
      clock: s.clock,
      stopLeadMs: options.stopLeadMs,
    });
  };

  const makeSide = (c: Cluster, off: number): Side => {
    const store = new FakeLeaseStore();
    store.create(NAME, spec, { status: { workload: { targetUID: TARGET_UID } } });
    store.stored(NAME).metadata.uid = LEASE_UID;
    const api = new TerminatingWorkloadApi();
    api.put('Deployment', deployment(0));
    api.put('ReplicaSet', replicaSet());
    const side: Side = {
      c,
      off,
      clock: new ManualClock(T0 + off * TICK_MS),
      store,
      api,
      client: new ReplayLeaseClient(),
      reconciler: undefined,
      run: undefined,
      answer: undefined,
      podName: undefined,
      pods: 0,
      lastToken: 0,
      ungated: new Set(),
      deletedAt: undefined,
    };
    side.reconciler = newReconciler(side);
    return side;
  };

  let sides: [Side, Side] | undefined;
  const sideOf = (c: Cluster): Side => sides?.[c] ?? fail('trace does not start with init');
  const setTime = (t: number): void => {
    centralClock.advance(T0 + t * TICK_MS - centralClock.now());
    for (const s of sides ?? []) s.clock.advance(T0 + (t + s.off) * TICK_MS - s.clock.now());
  };

  const startReconcile = (s: Side): void => {
    const reconciler = s.reconciler ?? fail(`cluster ${s.c} reconciles without a leader`);
    const run: NonNullable<Side['run']> = { settled: false };
    s.run = run;
    report.reconciles++;
    reconciler.reconcile(KEY, ctx(NAME)).then(
      (result) => {
        run.result = result;
        run.settled = true;
      },
      (error: unknown) => {
        run.error = error;
        run.settled = true;
      },
    );
  };

  const expectDone = (s: Side, requeueMs: number | undefined): void => {
    const run = s.run;
    if (run === undefined || !run.settled)
      fail(`cluster ${s.c}: the code's reconcile has not ended where the model's did`);
    else if (run.error !== undefined)
      fail(`cluster ${s.c}: the code's reconcile failed: ${String(run.error)}`);
    else if ((run.result?.requeueAfter ?? undefined) !== requeueMs)
      fail(
        `cluster ${s.c}: the code requeues after ${run.result?.requeueAfter} ms, the model after ${requeueMs} ms`,
      );
    s.run = undefined;
  };

  const podObject = (s: Side) => (s.podName === undefined ? undefined : s.api.stored('Pod', s.podName));
  const isRunning = (s: Side): boolean => {
    const p = podObject(s);
    return p !== undefined && !(p.spec?.schedulingGates ?? []).some((g) => g.name === SCHEDULING_GATE);
  };

  const checkInvariants = (): void => {
    if (sides === undefined) return;
    const [a, b] = sides;
    if (isRunning(a) && isRunning(b))
      fail('at-most-once broken in the code: an ungated Pod runs in both clusters');
    for (const s of sides) {
      const p = podObject(s);
      const uid = p?.metadata.uid ?? '';
      if (p !== undefined && isRunning(s) && !s.ungated.has(uid)) {
        s.ungated.add(uid);
        report.ungates++;
        const registered = s.store.objects.get(NAME)?.status?.workload?.pods ?? [];
        if (!registered.some((r) => r.uid === uid && r.name === p.metadata.name))
          fail(`cluster ${s.c}: Pod ${p.metadata.name} ungated without registration`);
      }
      const token = s.store.objects.get(NAME)?.status?.fencingToken ?? 0;
      if (token > 0 && token < s.lastToken)
        fail(`cluster ${s.c}: status token went back from ${s.lastToken} to ${token}`);
      if (token > 0) s.lastToken = token;
    }
  };

  /** Lenient replays: the code's own deletions end after termTicks, whatever the model did. */
  const terminate = (t: number): void => {
    for (const s of sides ?? []) {
      const p = podObject(s);
      if (p?.metadata.deletionTimestamp === undefined || s.podName === undefined) {
        s.deletedAt = undefined;
        continue;
      }
      s.deletedAt ??= t;
      const grace = s.api.podGrace.get(s.podName);
      const graceTicks = grace === undefined ? Number.POSITIVE_INFINITY : (grace * 1000) / TICK_MS;
      // Strictly later than the model's own end of a Pod deleted at the same instant (its podgone).
      if (t - s.deletedAt > Math.min(options.termTicks ?? 0, graceTicks)) {
        s.api.remove(s.podName);
        s.deletedAt = undefined;
      }
    }
  };

  for (at = 0; at < events.length; at++) {
    const e = events[at]!;
    report.events++;
    if (!strict) terminate(e.t);
    if (e.kind === 'init') {
      sides = [makeSide(0, e.off[0]), makeSide(1, e.off[1])];
      setTime(e.t);
      continue;
    }
    setTime(e.t);
    const s = sideOf(e.c);
    switch (e.kind) {
      case 'rec':
        if (
          !strict &&
          (s.reconciler === undefined ||
            s.client.pending !== undefined ||
            (s.run !== undefined && !s.run.settled))
        ) {
          skip();
          break;
        }
        if (!strict) s.run = undefined;
        if (s.run !== undefined)
          fail(`cluster ${s.c}: a reconcile starts while the previous one has not ended`);
        startReconcile(s);
        await settle();
        break;
      case 'send': {
        const p = s.client.pending;
        if (!strict && (p === undefined || p.kind !== e.call || p.id !== undefined)) {
          skip();
          break;
        }
        if (p === undefined || p.kind !== e.call || p.id !== undefined)
          fail(`cluster ${s.c}: the model sends ${e.call}, the code ${p === undefined ? 'nothing' : p.kind}`);
        else {
          if (e.call === 'release' && p.fencingToken !== e.tok)
            fail(`cluster ${s.c}: release with token ${p.fencingToken}, the model ${e.tok}`);
          p.id = e.t;
          requests.set(`${s.c}/${e.t}`, { c: s.c, kind: e.call, fencingToken: p.fencingToken });
          s.answer = undefined;
        }
        break;
      }
      case 'srv': {
        const found = requests.get(`${e.c}/${e.id}`);
        if (found === undefined && !strict) {
          skip();
          break;
        }
        const req = found ?? fail(`no request ${e.c}/${e.id} in flight`);
        const key = { namespace: NS, name: NAME };
        let answer: Side['answer'];
        if (req.kind === 'acquire') {
          answer = { value: await central.acquire(key, HOLDERS[e.c], spec.ttlSeconds * 1000) };
        } else {
          try {
            await central.release(key, HOLDERS[e.c], req.fencingToken);
            answer = {};
          } catch (err) {
            if (!(err instanceof ReleaseConflictError)) throw err;
            answer = { conflict: true };
          }
        }
        const rec = (await centralStore.get(key))?.fencingToken ?? 0;
        if (rec < centralToken) fail(`the central token went back from ${centralToken} to ${rec}`);
        centralToken = rec;
        if (s.client.pending?.id === e.id && s.answer === undefined) s.answer = answer;
        break;
      }
      case 'ans': {
        if (!strict && (s.client.pending === undefined || s.answer === undefined)) {
          skip();
          break;
        }
        const p = s.client.pending ?? fail(`cluster ${s.c}: an answer arrives, but the code waits for none`);
        const answer = s.answer ?? fail(`cluster ${s.c}: an answer arrives that the server did not give`);
        s.client.pending = undefined;
        s.answer = undefined;
        if (answer.conflict === true) p.reject(new LeaseConflictError('release: server status 409'));
        else p.resolve(answer.value);
        await settle();
        break;
      }
      case 'err': {
        if (!strict && s.client.pending?.id === undefined) {
          skip();
          break;
        }
        const p = s.client.pending ?? fail(`cluster ${s.c}: a call times out, but the code waits for none`);
        s.client.pending = undefined;
        s.answer = undefined;
        p.reject(new LeaseClientError('timeout', `${p.kind} ${KEY}: timed out`));
        await settle();
        break;
      }
      case 'done':
        if (!strict) break;
        if ('end' in e) {
          if (e.end !== 'gone') fail('the replay does not cover the hand-over (simulate without F_HANDOVER)');
          expectDone(s, undefined);
          if (s.store.objects.has(NAME))
            fail(`cluster ${s.c}: the model removed the finalizer, the code did not`);
        } else expectDone(s, e.rq * TICK_MS);
        break;
      case 'held': {
        if (!strict) break;
        const w = s.store.objects.get(NAME)?.status?.workload;
        const deadline = formatTime(s.clock.now() + e.dl * TICK_MS);
        if (w?.phase !== 'Active' || w.token !== e.tok || w.deadline !== deadline)
          fail(
            `cluster ${s.c}: the code recorded ${JSON.stringify({ phase: w?.phase, token: w?.token, deadline: w?.deadline })}, the model Active, token ${e.tok}, deadline ${deadline}`,
          );
        break;
      }
      case 'podnew': {
        if (podObject(s) !== undefined) {
          if (!strict) {
            skip();
            break;
          }
          fail(`cluster ${s.c}: a new Pod while the last one is still there`);
        }
        s.pods++;
        s.podName = `web-abc-${s.c}-${s.pods}`;
        s.api.put('Pod', pod(s.podName));
        break;
      }
      case 'permit': {
        const lease = await s.store.get(NS, NAME);
        if (
          lease !== undefined &&
          lease.spec.target !== undefined &&
          activeAt(lease, s.clock.now(), options.stopLeadMs)
        ) {
          const scope = new LeaseScope(
            { api: s.store, clock: s.clock, stopLeadMs: options.stopLeadMs, onWritten: () => {} },
            lease,
            HOLDERS[s.c],
            KEY,
            ctx(NAME),
          );
          await permitPods(scope, s.api).catch((err: unknown) =>
            fail(`cluster ${s.c}: permit failed: ${String(err)}`),
          );
        }
        break;
      }
      case 'ungate':
        if (strict && !isRunning(s)) fail(`cluster ${s.c}: the model lifts the gate, the code did not`);
        break;
      case 'poddel': {
        const p = podObject(s);
        if (strict && p !== undefined && p.metadata.deletionTimestamp === undefined)
          fail(`cluster ${s.c}: the model deletes the Pod, the code did not`);
        // The model bounds the Pod's stop by the grace the code's DELETE gives it.
        const grace = s.podName === undefined ? undefined : s.api.podGrace.get(s.podName);
        if (strict && e.g !== undefined) {
          if ((grace ?? Number.NaN) * 1000 !== e.g * TICK_MS)
            fail(
              `cluster ${s.c}: the code deletes the Pod with a grace of ${grace} s, the model ${e.g} ticks`,
            );
          report.graces++;
        }
        break;
      }
      case 'podgone': {
        const p = podObject(s);
        if (s.podName !== undefined && (strict || p?.metadata.deletionTimestamp !== undefined))
          s.api.remove(s.podName);
        else skip();
        break;
      }
      case 'crash':
        // A crashed process does nothing more: its call is never answered, its reconcile never ends.
        s.client.pending = undefined;
        s.answer = undefined;
        s.reconciler = undefined;
        s.run = undefined;
        await settle();
        break;
      case 'up':
        s.reconciler = newReconciler(s);
        break;
      case 'delete':
        s.store.markDeleted(NAME);
        break;
      case 'part':
      case 'cut':
        break;
      case 'handover':
      case 'handoverpass':
        fail('the replay does not cover the hand-over (simulate without F_HANDOVER)');
    }
    checkInvariants();
    if (options.log !== undefined && sides !== undefined) {
      const state = sides.map((x) => {
        const p = podObject(x);
        const w = x.store.objects.get(NAME)?.status?.workload;
        return `${x.c}:${w?.phase ?? '-'}/${w?.token ?? 0} pod=${p === undefined ? '-' : isRunning(x) ? (p.metadata.deletionTimestamp ? 'term' : 'up') : 'gated'}`;
      });
      options.log(`${JSON.stringify(e)}  ${state.join(' ')}`);
    }
  }
  return report;
}
