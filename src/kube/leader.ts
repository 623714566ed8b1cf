// Leader election on a coordination.k8s.io/v1 Lease with client-go's algorithm
// (k8s.io/client-go/tools/leaderelection): create the Lease if absent, otherwise update it with the
// observed resourceVersion (a 409 means another candidate won the race); a candidate takes over only
// when the record has not changed for leaseDurationSeconds of its *own* clock since it last saw it
// change, so clock skew between replicas does not matter; the leader renews every retry period and
// gives up when it cannot renew within the renew deadline.
//
// Deliberate differences from client-go, each on the safe side:
//  - the renew deadline runs from the moment the last successful write (the renewal, or the create or
//    update that won the Lease; not the read before it) was *sent*, not from the start of the current
//    retry cycle, so the leader always steps down before any candidate can take over; to leave that
//    deadline to the renewal itself, renewals are sent a retry period after the previous *send*, not
//    after its response;
//  - a leader that sees another holder in the Lease steps down at once instead of retrying until the
//    deadline;
//  - a waiting candidate wakes up when the observed record expires instead of up to a jittered retry
//    period later, and a fractional lease duration is rounded *up* to whole seconds in the Lease;
//  - release re-checks that the Lease is still ours before clearing it.
//
// The decision itself is pure and lives in leader-decision.ts; this module is the I/O edge: the Lease
// API, the clock, the retry loop, the callbacks and the metrics.
import { hostname } from 'node:os';
import type { V1Lease } from '@kubernetes/client-node';
import type { Counter, Gauge, Registry } from 'prom-client';
import type { Logger } from '../observability/logger.ts';
import { getOrCreateCounter, getOrCreateGauge } from '../observability/metrics.ts';
import { describeError, isConflict, isNotFound, readJson, resourcePath } from './client.ts';
import { type Clock, realClock } from './clock.ts';
import { Informer } from './informer.ts';
import {
  decideLeader,
  isLeaseValid,
  type LeaderDecision,
  type LeaderElectionRecord,
  type LeaderTimings,
  leaseSpecFromRecord,
  nextAttemptDelay,
  type Observation,
  observe,
  recordFromLease,
  releasedRecord,
  renewDeadlineAt,
  validateLeaderTimings,
} from './leader-decision.ts';
import type { KubeRequester } from './transport.ts';

/** `os.hostname() + "_" + random UUID`, as controller-runtime builds its leader election identity. */
export function defaultIdentity(): string {
  return `${hostname()}_${crypto.randomUUID()}`;
}

// ---------------------------------------------------------------------------------------------------
// The Lease API (an interface, so the loop can be driven by a fake in unit tests)

export interface LeaseClient {
  /** undefined when the Lease does not exist. */
  get(namespace: string, name: string, signal: AbortSignal): Promise<V1Lease | undefined>;
  create(namespace: string, lease: V1Lease, signal: AbortSignal): Promise<V1Lease>;
  /** PUT carrying `lease.metadata.resourceVersion`: rejects with a 409 when it is stale. */
  replace(namespace: string, name: string, lease: V1Lease, signal: AbortSignal): Promise<V1Lease>;
  /**
   * Optional: watches the Lease until `signal` aborts, calling `onHolder` with its holder on every change
   * ('' once released). A candidate then tries at once when the leader releases, instead of at its next
   * jittered retry (up to 2.2 retry periods later); without it, candidates only poll, as client-go's do.
   */
  watchHolder?(
    namespace: string,
    name: string,
    signal: AbortSignal,
    onHolder: (holder: string) => void,
  ): void;
}

export const LEASE_FIELD_MANAGER = 'berth-operator';

/**
 * A LeaseClient on the process's transport: every request gets the AbortSignal, so a request cut by the
 * renew deadline is really aborted, and shares the process's connection pool (a new TCP + TLS connection
 * per renewal made renewals slow enough under load to cost leadership). The holder watch is an informer
 * on the same transport.
 */
export function kubeLeaseClient(transport: KubeRequester): LeaseClient {
  const leases = (namespace: string) =>
    ({ group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespace }) as const;
  const query = { fieldManager: LEASE_FIELD_MANAGER };
  return {
    watchHolder(namespace, name, signal, onHolder) {
      const informer = new Informer<V1Lease>({
        name: `leader-election-${name}`,
        transport,
        resource: leases(namespace),
        fieldSelector: `metadata.name=${name}`,
      });
      const report = (lease: V1Lease): void => onHolder(lease.spec?.holderIdentity ?? '');
      informer.addEventHandler({ onAdd: report, onUpdate: (_old, lease) => report(lease) });
      informer.start(signal);
      signal.addEventListener('abort', () => void informer.stop(), { once: true });
    },
    async get(namespace, name, signal) {
      try {
        return await readJson<V1Lease>(
          await transport.request({ path: resourcePath(leases(namespace), name), signal }),
        );
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    create: async (namespace, body, signal) =>
      readJson<V1Lease>(
        await transport.request({
          method: 'POST',
          path: resourcePath(leases(namespace)),
          query,
          body,
          signal,
        }),
      ),
    replace: async (namespace, name, body, signal) =>
      readJson<V1Lease>(
        await transport.request({
          method: 'PUT',
          path: resourcePath(leases(namespace), name),
          query,
          body,
          signal,
        }),
      ),
  };
}

// ---------------------------------------------------------------------------------------------------
// The elector: I/O and timing around the pure decision

export interface LeaderElectorOptions extends LeaderTimings {
  client: LeaseClient;
  namespace: string;
  /** Lease name (`--leader-election-id`), also the `name` label of the metrics. */
  name: string;
  identity?: string;
  /** Clear the Lease when `run` is cancelled while leading, so a successor need not wait. */
  releaseOnCancel: boolean;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
  /** Uniform [0, 1) source for the retry jitter; Math.random by default. */
  random?: () => number;
  /** Labels set on the Lease when this elector creates it. */
  labels?: Record<string, string>;
}

export interface StoppedLeading {
  /** True when leadership was lost (renewal failed or someone else holds the Lease), not given up. */
  lost: boolean;
  /** True when the Lease was cleared for a successor. */
  released: boolean;
}

export interface LeaderCallbacks {
  /** Called once when this elector becomes leader; `signal` aborts when it stops leading. */
  onStartedLeading?(signal: AbortSignal): void;
  /** Called once after leading ends (lost, or cancelled and possibly released). Not called if never leader. */
  onStoppedLeading?(info: StoppedLeading): void;
  /** Called when the observed holder changes (including the first one seen, and '' after a release). */
  onNewLeader?(identity: string): void;
}

export interface LeaderRunResult {
  led: boolean;
  lost: boolean;
  released: boolean;
}

class RequestTimeout extends Error {
  constructor(ms: number) {
    super(`lease request timed out after ${Math.round(ms)}ms`);
    this.name = 'RequestTimeout';
  }
}

/** `sentAt`: when the winning write (create or update) was sent; the renew deadline counts from it. */
type AttemptResult = { ok: true; sentAt: number } | { ok: false; decision?: LeaderDecision; error?: unknown };

export class LeaderElector {
  readonly identity: string;
  readonly #o: LeaderElectorOptions;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #log: Logger | undefined;
  readonly #status: Gauge<'name'> | undefined;
  readonly #slowpath: Counter<'name'> | undefined;
  #observation: Observation | undefined;
  /** The Lease as last read or written by us: its resourceVersion guards the optimistic renewal. */
  #lease: V1Lease | undefined;
  #leading = false;
  #reportedLeader: string | undefined;
  #running = false;

  constructor(options: LeaderElectorOptions) {
    const problem = validateLeaderTimings(options);
    if (problem !== undefined) throw new Error(`leader election: ${problem}`);
    this.#o = options;
    this.identity = options.identity ?? defaultIdentity();
    this.#clock = options.clock ?? realClock;
    this.#random = options.random ?? Math.random;
    this.#log = options.logger?.child({
      lease: `${options.namespace}/${options.name}`,
      identity: this.identity,
    });
    if (options.registry !== undefined) {
      this.#status = getOrCreateGauge(options.registry, {
        name: 'leader_election_master_status',
        help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
        labelNames: ['name'],
      });
      this.#slowpath = getOrCreateCounter(options.registry, {
        name: 'leader_election_slowpath_total',
        help: "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease.",
        labelNames: ['name'],
      });
      this.#status.set({ name: options.name }, 0);
    }
  }

  /** True from winning the election until leadership is lost or given up. */
  isLeader(): boolean {
    return this.#leading;
  }
  /** Holder identity last observed ('' when released, undefined before the first read). */
  getLeader(): string | undefined {
    return this.#observation?.record.holderIdentity;
  }

  /** Whether a cancelled run clears the Lease for a successor (`--leader-election-release-on-cancel`). */
  get releasesOnCancel(): boolean {
    return this.#o.releaseOnCancel;
  }

  /**
   * Reads the Lease once: its holder ('' when released, undefined when there is no Lease). Rejects on an
   * API error or after a retry period.
   */
  async readHolder(): Promise<string | undefined> {
    const lease = await this.#call(this.#o.retryPeriodMs, (s) =>
      this.#o.client.get(this.#o.namespace, this.#o.name, s),
    );
    return lease === undefined ? undefined : recordFromLease(lease).holderIdentity;
  }

  /**
   * Campaigns until leader, then renews until `signal` aborts (release if configured) or leadership is
   * lost. Resolves when it is over; never rejects. One run at a time (a stopping leader may campaign
   * again to hand its work over when no successor appeared).
   */
  async run(signal: AbortSignal, callbacks: LeaderCallbacks = {}): Promise<LeaderRunResult> {
    if (this.#running) throw new Error('leader elector is already running');
    this.#running = true;
    try {
      return await this.#run(signal, callbacks);
    } finally {
      this.#running = false;
    }
  }

  async #run(signal: AbortSignal, callbacks: LeaderCallbacks): Promise<LeaderRunResult> {
    const result: LeaderRunResult = { led: false, lost: false, released: false };
    const acquiredAt = await this.#acquire(signal, callbacks);
    if (acquiredAt === undefined) return result;
    result.led = true;
    const term = new AbortController();
    this.#setLeading(true);
    this.#log?.info('successfully acquired lease');
    safely(() => callbacks.onStartedLeading?.(term.signal), this.#log, 'onStartedLeading');

    result.lost = await this.#renew(signal, acquiredAt, callbacks);
    this.#setLeading(false);
    term.abort(new Error(result.lost ? 'leader election lost' : 'leader election stopped'));
    if (result.lost) {
      this.#log?.error('leader election lost');
    } else if (this.#o.releaseOnCancel) {
      result.released = await this.#release();
    }
    safely(
      () => callbacks.onStoppedLeading?.({ lost: result.lost, released: result.released }),
      this.#log,
      'onStoppedLeading',
    );
    return result;
  }

  /** Resolves with the send time of the winning attempt, or undefined when cancelled first. */
  async #acquire(signal: AbortSignal, callbacks: LeaderCallbacks): Promise<number | undefined> {
    this.#log?.info('attempting to acquire leader lease');
    // A release seen by the watch ends the current wait; one seen during an attempt skips the next wait.
    const campaign = new AbortController();
    let released = false;
    let wake: AbortController | undefined;
    this.#o.client.watchHolder?.(
      this.#o.namespace,
      this.#o.name,
      AbortSignal.any([signal, campaign.signal]),
      (h) => {
        if (h !== '') return;
        released = true;
        wake?.abort();
      },
    );
    try {
      return await this.#campaign(signal, callbacks, () => {
        const seen = released;
        released = false;
        wake = new AbortController();
        return seen ? undefined : wake.signal;
      });
    } finally {
      campaign.abort();
    }
  }

  /** `nextWake()`: a signal that ends the coming wait early, or undefined to skip the wait. */
  async #campaign(
    signal: AbortSignal,
    callbacks: LeaderCallbacks,
    nextWake: () => AbortSignal | undefined,
  ): Promise<number | undefined> {
    while (!signal.aborted) {
      const attempt = await this.#tryAcquireOrRenew(this.#o.renewDeadlineMs, false);
      this.#reportTransition(callbacks);
      if (attempt.ok) {
        if (!signal.aborted) return attempt.sentAt;
        // Won just as we were cancelled: hand it straight back rather than leave it to expire.
        if (this.#o.releaseOnCancel) await this.#release();
        return undefined;
      }
      const delay = nextAttemptDelay(
        attempt.decision,
        this.#clock.now(),
        this.#o.retryPeriodMs,
        this.#random(),
      );
      const woken = nextWake();
      if (woken === undefined) continue;
      await this.#sleep(delay, AbortSignal.any([signal, woken]));
    }
    return undefined;
  }

  /**
   * Renews every retry period until cancelled (false) or leadership is lost (true). Renewals are sent
   * one retry period after the previous one was *sent* (client-go waits a retry period after it
   * completed): the renew deadline runs from the send, so a slow response must not also push the next
   * attempt towards the deadline, or two slow requests in a row would cost leadership under load.
   */
  async #renew(signal: AbortSignal, acquiredAt: number, callbacks: LeaderCallbacks): Promise<boolean> {
    let lastSentAt = acquiredAt;
    for (;;) {
      const due = lastSentAt + this.#o.retryPeriodMs - this.#clock.now();
      if (!(await this.#sleep(Math.max(0, due), signal))) return false;
      const deadline = renewDeadlineAt(lastSentAt, this.#o.renewDeadlineMs);
      for (;;) {
        const sentAt = this.#clock.now();
        if (sentAt >= deadline) {
          this.#log?.error(
            { renewDeadlineMs: this.#o.renewDeadlineMs },
            'failed to renew lease within the renew deadline',
          );
          return true;
        }
        const attempt = await this.#tryAcquireOrRenew(deadline - sentAt, true);
        this.#reportTransition(callbacks);
        if (attempt.ok) {
          lastSentAt = attempt.sentAt;
          break;
        }
        if (attempt.decision !== undefined && attempt.decision.action !== 'renew') {
          // Someone else holds (or cleared) the Lease: we are no longer leader, whatever the deadline says.
          this.#log?.error({ holder: this.getLeader() }, 'lease is no longer held by this candidate');
          return true;
        }
        if (signal.aborted) return false;
        const wait = Math.min(this.#o.retryPeriodMs, deadline - this.#clock.now());
        if (wait > 0 && !(await this.#sleep(wait, signal))) return false;
      }
    }
  }

  /** One round of client-go's tryAcquireOrRenew; `renewOnly` never takes over a Lease we do not hold. */
  async #tryAcquireOrRenew(timeoutMs: number, renewOnly: boolean): Promise<AttemptResult> {
    const ns = this.#o.namespace;
    const name = this.#o.name;
    const opts = { leaseDurationMs: this.#o.leaseDurationMs };
    const startedAt = this.#clock.now();
    const remaining = (): number => timeoutMs - (this.#clock.now() - startedAt);

    // 1. Fast path: the leader updates optimistically, assuming its last write is the current version.
    const cached = this.#observation;
    if (
      cached !== undefined &&
      this.#lease !== undefined &&
      this.#leading &&
      isLeaseValid(cached, startedAt)
    ) {
      const decision = decideLeader(cached, startedAt, this.identity, opts);
      if (decision.action === 'renew') {
        try {
          const sentAt = this.#clock.now();
          const written = await this.#call(remaining(), (s) =>
            this.#o.client.replace(ns, name, this.#withRecord(decision.record), s),
          );
          this.#wrote(written);
          return { ok: true, sentAt };
        } catch (err) {
          this.#log?.debug(
            { err: describeError(err) },
            'optimistic lease renewal failed, falling back to slow path',
          );
          this.#slowpath?.inc({ name });
        }
      }
    }

    // 2. Read the Lease, or create it.
    let current: V1Lease | undefined;
    try {
      current = await this.#call(remaining(), (s) => this.#o.client.get(ns, name, s));
    } catch (err) {
      this.#log?.warn({ err: describeError(err) }, 'error retrieving leader election lease');
      return { ok: false, error: err };
    }
    const now = this.#clock.now();
    if (current === undefined) {
      const decision = decideLeader(undefined, now, this.identity, opts);
      // A leader whose Lease was deleted has lost it: re-creating it would hide the gap.
      if (renewOnly) return { ok: false, decision };
      const body: V1Lease = {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name, namespace: ns, ...(this.#o.labels ? { labels: this.#o.labels } : {}) },
        spec: leaseSpecFromRecord(decision.record),
      };
      try {
        const sentAt = this.#clock.now();
        this.#wrote(await this.#call(remaining(), (s) => this.#o.client.create(ns, body, s)));
        return { ok: true, sentAt };
      } catch (err) {
        this.#log?.warn({ err: describeError(err) }, 'error initially creating leader election lease');
        return { ok: false, error: err };
      }
    }

    // 3. Judge the record by when we saw it change, then renew, wait or take over.
    this.#lease = current;
    this.#observation = observe(this.#observation, recordFromLease(current), now);
    const decision = decideLeader(this.#observation, now, this.identity, opts);
    if (decision.action === 'wait') return { ok: false, decision };
    if (renewOnly && decision.action !== 'renew') return { ok: false, decision };
    if (decision.action === 'renew') this.#slowpath?.inc({ name });
    try {
      const sentAt = this.#clock.now();
      this.#wrote(
        await this.#call(remaining(), (s) =>
          this.#o.client.replace(ns, name, this.#withRecord(decision.record), s),
        ),
      );
      return { ok: true, sentAt };
    } catch (err) {
      if (isConflict(err)) this.#log?.debug('lost the race to update the lease (409 Conflict)');
      else this.#log?.warn({ err: describeError(err) }, 'failed to update leader election lease');
      return { ok: false, decision, error: err };
    }
  }

  async #release(): Promise<boolean> {
    const ns = this.#o.namespace;
    const name = this.#o.name;
    const startedAt = this.#clock.now();
    const remaining = (): number => this.#o.renewDeadlineMs - (this.#clock.now() - startedAt);
    // Two tries: with our last written version first, then (after a 409) with a fresh read.
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        if (attempt > 0 || this.#lease === undefined) {
          const fresh = await this.#call(remaining(), (s) => this.#o.client.get(ns, name, s));
          if (fresh === undefined) return false;
          this.#lease = fresh;
        }
        const record = recordFromLease(this.#lease);
        if (record.holderIdentity !== this.identity) {
          this.#log?.info({ holder: record.holderIdentity }, 'lease is no longer ours; nothing to release');
          return false;
        }
        const written = await this.#call(remaining(), (s) =>
          this.#o.client.replace(ns, name, this.#withRecord(releasedRecord(record, this.#clock.now())), s),
        );
        this.#wrote(written);
        this.#log?.info('released leader election lease');
        return true;
      } catch (err) {
        if (isConflict(err) && attempt === 0) continue;
        this.#log?.error({ err: describeError(err) }, 'failed to release leader election lease');
        return false;
      }
    }
    return false;
  }

  #withRecord(record: LeaderElectionRecord): V1Lease {
    const base = this.#lease ?? {};
    return { ...base, spec: { ...base.spec, ...leaseSpecFromRecord(record) } };
  }

  #wrote(lease: V1Lease): void {
    this.#lease = lease;
    this.#observation = { record: recordFromLease(lease), observedAt: this.#clock.now() };
  }

  #setLeading(leading: boolean): void {
    this.#leading = leading;
    this.#status?.set({ name: this.#o.name }, leading ? 1 : 0);
  }

  #reportTransition(callbacks: LeaderCallbacks): void {
    const holder = this.#observation?.record.holderIdentity;
    if (holder === undefined || holder === this.#reportedLeader) return;
    this.#reportedLeader = holder;
    if (holder !== this.identity)
      this.#log?.info({ holder }, holder === '' ? 'lease released by its holder' : 'new leader observed');
    safely(() => callbacks.onNewLeader?.(holder), this.#log, 'onNewLeader');
  }

  /** Runs one API call with its own abort signal, aborted after `ms` on the elector's clock. */
  async #call<T>(ms: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    if (!(ms > 0)) throw new RequestTimeout(0);
    const controller = new AbortController();
    let timer: ReturnType<Clock['setTimeout']> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = this.#clock.setTimeout(() => {
        const err = new RequestTimeout(ms);
        controller.abort(err);
        reject(err);
      }, ms);
    });
    try {
      return await Promise.race([fn(controller.signal), timeout]);
    } finally {
      timer?.cancel();
    }
  }

  /** Sleeps on the elector's clock; false when `signal` aborted first. */
  async #sleep(ms: number, signal: AbortSignal): Promise<boolean> {
    try {
      await this.#clock.sleep(ms, signal);
      return true;
    } catch {
      return false;
    }
  }
}

function safely(fn: () => void, log: Logger | undefined, what: string): void {
  try {
    fn();
  } catch (err) {
    log?.error({ err }, `${what} callback threw`);
  }
}
