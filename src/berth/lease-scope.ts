// One reconcile of one BerthLease, as the reconciler and the workload hooks share it (the scope of
// Cluster API's controllers): the latest copy of the object, the holder identity, the reconcile's signal
// and logger, and its guarded status writes. A write is skipped when nothing changed, announced to the
// own-writes filter, and reported (Events, metrics) once it landed.
import { isDeepStrictEqual } from 'node:util';
import type { Clock } from '../kube/clock.ts';
import type { ReconcileContext } from '../kube/controller.ts';
import type { Logger } from '../observability/logger.ts';
import type { BerthLease, BerthLeaseStatus } from './api.ts';
import type { BerthLeaseApi } from './leaseio.ts';
import { observedWrite, type WriteObserver } from './ownwrites.ts';
import type { StatusStamp } from './status.ts';
import type { LeaseRun } from './workload-manager.ts';

export interface LeaseScopeDeps {
  api: BerthLeaseApi;
  clock: Clock;
  stopLeadMs: number;
  writes?: WriteObserver;
  onWritten(before: BerthLeaseStatus | undefined, after: BerthLease): void;
}

/** One reconcile of one lease: the latest copy of the object and its guarded status writes. */
export class LeaseScope implements LeaseRun {
  readonly holder: string;
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly stopLeadMs: number;
  readonly #deps: LeaseScopeDeps;
  readonly #key: string;
  #lease: BerthLease;

  constructor(deps: LeaseScopeDeps, lease: BerthLease, holder: string, key: string, ctx: ReconcileContext) {
    this.#deps = deps;
    this.#lease = lease;
    this.#key = key;
    this.holder = holder;
    this.signal = ctx.signal;
    this.log = ctx.log;
    this.stopLeadMs = deps.stopLeadMs;
  }

  get lease(): BerthLease {
    return this.#lease;
  }

  now(): number {
    return this.#deps.clock.now();
  }

  stamp(): StatusStamp {
    return { now: this.now(), generation: this.#lease.metadata.generation };
  }

  async writeStatus(status: BerthLeaseStatus): Promise<BerthLease> {
    const before = this.#lease.status;
    if (isDeepStrictEqual(before ?? {}, status)) return this.#lease;
    const written = await observedWrite(this.#deps.writes, this.#key, () =>
      this.#deps.api.updateStatus(this.#lease, status, this.signal),
    );
    this.#lease = written;
    this.#deps.onWritten(before, written);
    return written;
  }
}
