// `helper renew`, the sidecar berth-sidecar (Go's Renewer; docs/helper.md §3.2): renews every heartbeat,
// keeps the marker fresh, answers the liveness endpoint, and stops the main containers when the lease is
// lost or can no longer be proven (decide.ts). It starts stopped: the handoff `acquire` left names a
// lease but proves no remaining lifetime, so the app is allowed only once a renewal confirms it. With
// restartPodOnLoss it never waits to reacquire in place: a loss, or a start without a fresh handoff (the
// kubelet restarted this container alone), ends it with the code that restarts the whole Pod
// (injection/restart-pod.ts), so berth-acquire gates every main container again.
import { type AcquireResult, isLeaseConflict, type LeaseClient } from '../berth/leaseclient.ts';
import type { Clock, Timer } from '../kube/clock.ts';
import { configLeadMs, type HelperConfig } from './config.ts';
import {
  afterReacquire,
  afterRenew,
  type CallResult,
  callBoundMs,
  type Decision,
  type LeaseView,
  probeAnswer,
} from './decide.ts';
import type { Enforcer } from './enforce.ts';
import type { HelperLog } from './log.ts';
import { evaluateMarker, type HelperState } from './state.ts';

export interface SidecarDeps {
  client: LeaseClient;
  state: HelperState;
  enforcer: Enforcer;
  clock: Clock;
  log: HelperLog;
  /** Called once when the Pod must restart (restartPodOnLoss); the process then exits with its code. */
  restartPod(why: string): void;
}

/** Bound of the release on shutdown (Go's 5 s). */
export const RELEASE_ON_SHUTDOWN_TIMEOUT_MS = 5_000;

export class Sidecar {
  readonly #config: HelperConfig;
  readonly #deps: SidecarDeps;
  readonly #log: HelperLog;
  /** TTL minus the enforcement lead: how long a confirmation lets the app run. */
  readonly #windowMs: number;
  #lease: LeaseView = { held: false, token: 0, fenceAt: undefined };
  #lossReason = 'not confirmed yet';
  #ticker: Timer | undefined;
  #fence: Timer | undefined;
  #tick: Promise<void> | undefined;
  #inFlight: AbortController | undefined;
  #stopping = false;

  constructor(config: HelperConfig, deps: SidecarDeps) {
    this.#config = config;
    this.#deps = deps;
    this.#windowMs = config.ttlSeconds * 1_000 - configLeadMs(config);
    this.#log = deps.log.with({
      lease: config.leaseName,
      namespace: config.leaseNamespace,
      mode: config.mode,
      holder: config.holder,
    });
  }

  /** Current view (tests, and the log). */
  get lease(): LeaseView {
    return this.#lease;
  }

  /** Gates the app, adopts a matching handoff, renews once, then every heartbeat. */
  async start(): Promise<void> {
    const restartPod = this.#config.restartPodOnLoss;
    // Taken, not read, when restarting the Pod: a later start of this container finds none.
    const handoff = restartPod ? await this.#deps.state.takeHandoff() : await this.#deps.state.readHandoff();
    if (handoff !== undefined && handoff.holder === this.#config.holder && handoff.token > 0) {
      this.#lease = { held: true, token: handoff.token, fenceAt: undefined };
    } else if (restartPod) {
      await this.#deps.enforcer.hold();
      this.#restartPod('no lease handoff from berth-acquire (this container was restarted on its own)');
      return;
    } else {
      this.#log.warn('no matching lease handoff; gating before acquiring as the configured holder');
    }
    await this.#deps.enforcer.hold();
    this.#log.info('sidecar starting', {
      held: this.#lease.held,
      heartbeatMs: this.#config.heartbeatMs,
      ttlSeconds: this.#config.ttlSeconds,
      leadMs: configLeadMs(this.#config),
    });
    this.#ticker = this.#deps.clock.setInterval(() => this.#onTick(), this.#config.heartbeatMs);
    if (this.#lease.held) this.#onTick();
    await this.#tick;
  }

  /** The liveness endpoint's answer. */
  async probe(): Promise<{ status: 200 | 503; body: string }> {
    const path = this.#deps.state.markerPath;
    const verdict = await evaluateMarker(path, this.#config.ttlSeconds * 1_000, () => this.#deps.clock.now());
    return probeAnswer(this.#lease, this.#lossReason, verdict, path);
  }

  /** SIGTERM: stop ticking, fail the probe, release the lease when configured. */
  async stop(): Promise<void> {
    this.#halt();
    await this.#tick;
    const { held, token } = this.#lease;
    this.#lease = { held: false, token, fenceAt: undefined };
    this.#lossReason = 'sidecar stopping';
    await this.#deps.state.markUnhealthy().catch(() => undefined);
    if (!this.#config.releaseOnShutdown || !held) {
      this.#log.info('sidecar shutting down without release', { held });
      return;
    }
    try {
      await this.#deps.client.release(
        this.#config.leaseNamespace,
        this.#config.leaseName,
        this.#config.holder,
        token,
        {
          timeoutMs: RELEASE_ON_SHUTDOWN_TIMEOUT_MS,
        },
      );
      this.#log.info('released lease on shutdown');
    } catch (err) {
      if (isLeaseConflict(err))
        this.#log.info('release on shutdown skipped: lease already held by another (conflict)');
      else this.#log.warn('best-effort release on shutdown failed', { error: err });
    }
  }

  /** No more ticks, fence or call: the sidecar is stopping or about to exit. */
  #halt(): void {
    this.#stopping = true;
    this.#deps.clock.clearTimeout(this.#ticker);
    this.#deps.clock.clearTimeout(this.#fence);
    this.#inFlight?.abort(new Error('sidecar stopping'));
  }

  #restartPod(why: string): void {
    if (this.#stopping) return;
    this.#halt();
    this.#log.warn(`${why}; exiting so that the kubelet restarts every container of the Pod`);
    this.#deps.restartPod(why);
  }

  // One tick at a time, as Go's loop: a tick that fires while a call is out is dropped.
  #onTick(): void {
    if (this.#stopping || this.#tick !== undefined) return;
    this.#tick = (this.#lease.held ? this.#renew() : this.#reacquire())
      .catch((err: unknown) => this.#log.error('sidecar tick failed', { error: err }))
      .finally(() => {
        this.#tick = undefined;
      });
  }

  async #call(
    run: (signal: AbortSignal, timeoutMs: number) => Promise<AcquireResult>,
  ): Promise<CallResult & { startedAt: number }> {
    const startedAt = this.#deps.clock.now();
    const controller = new AbortController();
    this.#inFlight = controller;
    const timeoutMs = Math.max(1, callBoundMs(this.#lease, startedAt, this.#config.heartbeatMs));
    // Bounded on the sidecar's own clock too: the deadline must not wait for any client's timer.
    const timer = this.#deps.clock.setTimeout(
      () => controller.abort(new Error(`no answer within ${timeoutMs}ms`)),
      timeoutMs,
    );
    try {
      const value = await run(controller.signal, timeoutMs);
      return { ok: true, value, startedAt };
    } catch (error) {
      return { ok: false, error, startedAt };
    } finally {
      this.#deps.clock.clearTimeout(timer);
      this.#inFlight = undefined;
    }
  }

  async #renew(): Promise<void> {
    const { fenceAt } = this.#lease;
    if (fenceAt !== undefined && this.#deps.clock.now() >= fenceAt) {
      await this.#apply({
        action: 'lose',
        lease: { ...this.#lease, held: false, fenceAt: undefined },
        why: 'local lease deadline reached',
      });
      return;
    }
    const { leaseNamespace, leaseName, holder, ttlSeconds } = this.#config;
    const token = this.#lease.token;
    const result = await this.#call((signal, timeoutMs) =>
      this.#deps.client.renew(leaseNamespace, leaseName, holder, token, ttlSeconds, { signal, timeoutMs }),
    );
    if (this.#stopping) return;
    await this.#apply(
      afterRenew(this.#lease, result, result.startedAt, this.#deps.clock.now(), this.#windowMs),
    );
  }

  async #reacquire(): Promise<void> {
    // Stopped again at every tick: the kubelet may have restarted a container.
    await this.#deps.enforcer
      .hold()
      .catch((err: unknown) => this.#log.warn('re-enforce while gated failed', { error: err }));
    const { leaseNamespace, leaseName, holder, ttlSeconds } = this.#config;
    const result = await this.#call((signal, timeoutMs) =>
      this.#deps.client.acquire(leaseNamespace, leaseName, holder, ttlSeconds, { signal, timeoutMs }),
    );
    if (this.#stopping) return;
    const decision = afterReacquire(
      this.#lease,
      result,
      result.startedAt,
      this.#deps.clock.now(),
      this.#windowMs,
    );
    if (decision.action === 'confirm')
      await this.#deps.state
        .writeAcquired(holder, decision.lease.token)
        .catch((err: unknown) => this.#log.warn('persist reacquired state failed', { error: err }));
    await this.#apply(decision);
  }

  async #apply(decision: Decision): Promise<void> {
    const wasConfirmed = this.#lease.held && this.#lease.fenceAt !== undefined;
    this.#lease = decision.lease;
    switch (decision.action) {
      case 'confirm': {
        this.#armFence(decision.lease.fenceAt!);
        await this.#deps.enforcer
          .release()
          .catch((err: unknown) => this.#log.warn('enforcer release failed', { error: err }));
        const fields = {
          fencingToken: decision.lease.token,
          fenceAt: new Date(decision.lease.fenceAt!).toISOString(),
        };
        if (wasConfirmed) this.#log.debug('lease renewed', fields);
        else this.#log.info('lease confirmed; main containers allowed', fields);
        return;
      }
      case 'keep':
        if (decision.warn !== undefined) this.#log.warn(decision.warn);
        return;
      case 'wait':
        this.#log.info(decision.why);
        return;
      case 'lose':
        await this.#lose(decision.why);
        return;
    }
  }

  #armFence(at: number): void {
    this.#deps.clock.clearTimeout(this.#fence);
    // A timer of its own: the deadline can fall between heartbeats, or while a call is out.
    this.#fence = this.#deps.clock.setTimeout(() => {
      if (this.#stopping || !this.#lease.held) return;
      this.#lease = { held: false, token: this.#lease.token, fenceAt: undefined };
      this.#lose('local lease deadline reached').catch((err: unknown) =>
        this.#log.error('enforce at the deadline failed', { error: err }),
      );
    }, at - this.#deps.clock.now());
  }

  async #lose(why: string): Promise<void> {
    this.#deps.clock.clearTimeout(this.#fence);
    this.#lossReason = why;
    if (this.#config.restartPodOnLoss) {
      // The marker only: the kubelet's kill follows the exit at once, and a main container that a signal
      // stopped first would be restarted on its own.
      await this.#deps.state
        .markUnhealthy()
        .catch((err: unknown) => this.#log.warn('removing the marker on lease loss failed', { error: err }));
      this.#restartPod(why);
      return;
    }
    this.#log.warn(`${why}; stopping the main containers`, { enforce: this.#config.enforce });
    await this.#deps.enforcer
      .hold()
      .catch((err: unknown) => this.#log.warn('enforce on lease loss failed', { error: err }));
  }
}
