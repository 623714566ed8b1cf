// The leader's exit controller of the opt-in scope (docs/admission.md, "The admission scope"): a namespace
// labelled `leaving` leaves the scope once this replica has seen it leaving for SCOPE_SETTLE_MS (every
// kube-apiserver then refuses new BerthLeases with a target there, and every lease admitted before is
// written) and live LISTs find nothing managed left. The label is then removed with a merge patch guarded
// by the resourceVersion this replica saw, so a namespace set back to `enabled` meanwhile keeps its label.
// While something is left, a Warning Event on the Namespace names it (once per distinct reason).
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { SCOPE_LABEL, SCOPE_LEAVING } from '../src/berth/api.ts';
import { isConflict, isNotFound, readJson, resourcePath } from '../src/kube/client.ts';
import type { Clock } from '../src/kube/clock.ts';
import {
  Controller,
  type ReconcileContext,
  type ReconcileResult,
  type Source,
} from '../src/kube/controller.ts';
import type { KubeRequester } from '../src/kube/transport.ts';
import type { Logger } from '../src/observability/logger.ts';
import type { AdmissionIO } from './io.ts';
import { type ScopeEntries, scopeHolder, settleLeft } from './scope.ts';

/** How often a leaving namespace that still holds something is looked at again. */
export const SCOPE_EXIT_RECHECK_MS = 5_000;

export interface ScopeExitRecorder {
  normal(regarding: KubernetesObject, reason: string, action: string, note?: string): Promise<void>;
  warning(regarding: KubernetesObject, reason: string, action: string, note?: string): Promise<void>;
}

export interface ScopeExitOptions {
  /** The namespaces of the scope (NamespaceScope's informer and entries). */
  namespaces: Source<KubernetesObject>;
  scope: ScopeEntries;
  /** Live reads (the same holder check as the guard's). */
  io: () => AdmissionIO;
  transport: KubeRequester;
  clock: Clock;
  recorder?: ScopeExitRecorder;
  logger?: Logger;
  registry?: Registry;
}

const NAMESPACES = { version: 'v1', plural: 'namespaces' } as const;

/** What the exit controller does for a namespace now. */
export type ScopeExitStep =
  /** This replica does not see it leaving (out of scope, enabled, or not listed yet). */
  | { kind: 'none' }
  /** Leaving, not for the settle period yet: look again then. */
  | { kind: 'settling'; requeueAfterMs: number }
  /** Settled, but something managed is left (the reason). */
  | { kind: 'waiting'; holder: string }
  /** Settled and nothing left: remove the label, guarded by the resourceVersion this replica saw. */
  | { kind: 'remove'; resourceVersion: string };

/**
 * The exit's decision from this replica's entry at `now`; `holder` runs the live LISTs (scopeHolder),
 * only once the namespace has been seen leaving for the settle period.
 */
export async function decideScopeExit(
  entry: ReturnType<ScopeEntries['entry']>,
  now: number,
  holder: () => Promise<string | undefined>,
): Promise<ScopeExitStep> {
  const left = settleLeft(entry, SCOPE_LEAVING, now);
  if (left === undefined || entry === undefined || entry === 'out') return { kind: 'none' };
  if (left > 0) return { kind: 'settling', requeueAfterMs: left };
  const found = await holder();
  return found === undefined
    ? { kind: 'remove', resourceVersion: entry.resourceVersion }
    : { kind: 'waiting', holder: found };
}

/** The removal's merge patch: the label gone, only if the namespace is still at `resourceVersion`. */
export const scopeRemovalPatch = (resourceVersion: string) => ({
  metadata: { resourceVersion, labels: { [SCOPE_LABEL]: null } },
});

export class ScopeExit {
  readonly controller: Controller;
  readonly #o: ScopeExitOptions;
  /** The last reason reported per namespace, so that a wait is reported once. */
  readonly #reported = new Map<string, string>();

  constructor(options: ScopeExitOptions) {
    this.#o = options;
    this.controller = new Controller({
      name: 'admission-scope-exit',
      reconcile: (key, ctx) => this.#reconcile(key, ctx),
      clock: options.clock,
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
    });
    this.controller.watches(options.namespaces, { map: (ns) => ns.metadata?.name });
  }

  async #reconcile(name: string, ctx: ReconcileContext): Promise<ReconcileResult> {
    const step = await decideScopeExit(this.#o.scope.entry(name), this.#o.clock.now(), () =>
      scopeHolder(this.#o.io(), name),
    );
    if (step.kind === 'none') {
      this.#reported.delete(name);
      return {};
    }
    if (step.kind === 'settling') return { requeueAfter: step.requeueAfterMs };
    const regarding = { apiVersion: 'v1', kind: 'Namespace', metadata: { name } };
    if (step.kind === 'waiting') {
      const { holder } = step;
      if (this.#reported.get(name) !== holder) {
        this.#reported.set(name, holder);
        ctx.log.info({ holder }, 'namespace leaving the workload admission scope waits');
        void this.#o.recorder?.warning(regarding, 'ScopeExitWaiting', 'LeaveScope', holder);
      }
      return { requeueAfter: SCOPE_EXIT_RECHECK_MS };
    }
    try {
      await readJson<unknown>(
        await this.#o.transport.request({
          method: 'PATCH',
          path: resourcePath(NAMESPACES, name),
          body: scopeRemovalPatch(step.resourceVersion),
          contentType: 'application/merge-patch+json',
          signal: ctx.signal,
        }),
      );
    } catch (err) {
      // Changed since this replica saw it (set back to enabled, relabelled): its next event decides.
      if (isConflict(err) || isNotFound(err)) return {};
      throw err;
    }
    this.#reported.delete(name);
    ctx.log.info('namespace left the workload admission scope');
    void this.#o.recorder?.normal(
      regarding,
      'LeftAdmissionScope',
      'LeaveScope',
      `nothing managed was left: label ${SCOPE_LABEL} removed`,
    );
    return {};
  }

  start(signal?: AbortSignal): Promise<void> {
    return this.controller.start(signal);
  }

  stop(): Promise<void> {
    return this.controller.stop();
  }
}
