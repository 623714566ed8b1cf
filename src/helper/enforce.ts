// How the sidecar stops the main containers when the lease is lost and lets them run again once it is
// back (docs/helper.md §3.3). `hold` runs again at every tick while the lease is not held, so both are
// idempotent: a container the kubelet restarts is stopped again.
//
// - probe: the marker goes away, the liveness endpoint answers 503 and the kubelet kills the containers.
// - signal: the same, and the target's processes in the shared process namespace get SIGTERM, then
//   SIGKILL once the grace has passed (Go's signalEnforcer, with the SIGKILL on a timer of its own instead
//   of at the next tick).
import type { Clock, Timer } from '../kube/clock.ts';
import type { HelperLog } from './log.ts';
import { type ProcTable, workloadPids } from './procs.ts';
import type { HelperState } from './state.ts';

export interface Enforcer {
  hold(): Promise<void>;
  release(): Promise<void>;
}

export class MarkerEnforcer implements Enforcer {
  readonly #state: HelperState;

  constructor(state: HelperState) {
    this.#state = state;
  }

  hold(): Promise<void> {
    return this.#state.markUnhealthy();
  }

  /** Also refreshes the marker's time: the liveness endpoint requires it at most one TTL old. */
  release(): Promise<void> {
    return this.#state.markHealthy();
  }
}

export interface SignalDeps {
  procs: ProcTable;
  kill(pid: number, signal: 'SIGTERM' | 'SIGKILL'): void;
  clock: Clock;
  log: HelperLog;
}

export class SignalEnforcer implements Enforcer {
  readonly #marker: MarkerEnforcer;
  readonly #target: string;
  readonly #graceMs: number;
  readonly #deps: SignalDeps;
  /** When each PID still present got its SIGTERM, and whether it got its SIGKILL. */
  #signalled = new Map<number, { termedAt: number; killed: boolean }>();
  #escalation: Timer | undefined;

  constructor(state: HelperState, target: string, graceMs: number, deps: SignalDeps) {
    this.#marker = new MarkerEnforcer(state);
    this.#target = target;
    this.#graceMs = graceMs;
    this.#deps = deps;
  }

  async hold(): Promise<void> {
    await this.#marker.hold();
    const now = this.#deps.clock.now();
    const pids = await workloadPids(this.#deps.procs, this.#target);
    for (const pid of this.#signalled.keys()) if (!pids.includes(pid)) this.#signalled.delete(pid);
    for (const pid of pids) {
      const seen = this.#signalled.get(pid);
      if (seen === undefined) {
        this.#signalled.set(pid, { termedAt: now, killed: false });
        this.#signal(pid, 'SIGTERM');
      } else if (!seen.killed && now - seen.termedAt >= this.#graceMs) {
        seen.killed = true;
        this.#signal(pid, 'SIGKILL');
      }
    }
    const waiting = [...this.#signalled.values()].filter((s) => !s.killed);
    if (waiting.length > 0 && this.#escalation === undefined) {
      const due = Math.min(...waiting.map((s) => s.termedAt + this.#graceMs));
      this.#escalation = this.#deps.clock.setTimeout(() => {
        this.#escalation = undefined;
        this.hold().catch((err: unknown) =>
          this.#deps.log.warn('enforce after the grace failed', { error: err }),
        );
      }, due - now);
    }
  }

  /** Forgets the escalation, so that a later loss starts with SIGTERM again. */
  async release(): Promise<void> {
    this.#deps.clock.clearTimeout(this.#escalation);
    this.#escalation = undefined;
    this.#signalled = new Map();
    await this.#marker.release();
  }

  #signal(pid: number, signal: 'SIGTERM' | 'SIGKILL'): void {
    try {
      this.#deps.kill(pid, signal);
      this.#deps.log.info(`sent ${signal} to main process`, { pid, target: this.#target });
    } catch (err) {
      this.#deps.log.warn(`${signal} failed`, { pid, error: err });
    }
  }
}
