// Which namespaces are in the opt-in workload admission scope, as this replica sees them
// (docs/admission.md, "The admission scope"): an informer of the namespaces labelled `enabled` or `leaving`,
// kept on every replica. The BerthLease controller watches it (a namespace entering or leaving the scope
// reconciles its leases at once) and reads it live for the moment a workload is about to be activated; the
// scope's guards and the exit controller read since when this replica has seen each namespace's value,
// which is never earlier than when it was written (an informer lags, it never leads).
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { isNotFound, readJson, resourcePath } from '../kube/client.ts';
import { type Clock, realClock } from '../kube/clock.ts';
import { type EventHandlers, Informer } from '../kube/informer.ts';
import type { KubeRequester } from '../kube/transport.ts';
import type { Logger } from '../observability/logger.ts';
import { inAdmissionScope, SCOPE_ENABLED, SCOPE_LABEL, SCOPE_LEAVING, scopeValue } from './api.ts';

const NAMESPACES = { version: 'v1', plural: 'namespaces' } as const;

/** What the managed path asks of the scope (NamespaceScope; tests pass a fake). */
export interface ScopeView {
  /** From the cache: whether `namespace` is in scope; undefined until the cache has listed once. */
  cached(namespace: string): boolean | undefined;
  /** A live read: whether it is in scope now. */
  live(namespace: string, signal?: AbortSignal): Promise<boolean>;
}

/** A namespace in the scope as this replica has seen it: its value, and since when it has seen it. */
export interface ScopeEntry {
  value: typeof SCOPE_ENABLED | typeof SCOPE_LEAVING;
  /** This replica's clock when it first saw the namespace with this value (epoch ms). */
  since: number;
  /** The namespace's resourceVersion when last seen (the exit controller's write is guarded by it). */
  resourceVersion: string;
}

/**
 * What this replica records for a namespace it has just seen: nothing once it is out of scope, else its
 * value, with `since` carried over only from an update seen on the watch with the same value. A relist
 * may have skipped a change and back (enabled, then leaving again), which must not count as settled
 * (docs/verification.md, "a relist keeps since"). Pure.
 */
export function nextScopeEntry(
  before: ScopeEntry | undefined,
  ns: KubernetesObject,
  relisted: boolean,
  now: number,
): ScopeEntry | undefined {
  const value = scopeValue(ns.metadata?.labels);
  if (value !== SCOPE_ENABLED && value !== SCOPE_LEAVING) return undefined;
  const since = !relisted && before?.value === value ? before.since : now;
  return { value, since, resourceVersion: ns.metadata?.resourceVersion ?? '' };
}

/**
 * What this replica has seen of the namespaces in scope, fed by the events of a label-selected informer
 * (`handlers`): one that leaves the scope is a deletion there. NamespaceScope's record, on its own so that
 * the trace replay of verify/scope.pml drives the same handlers (docs/verification.md, "The scope replay").
 */
export class ScopeObservations {
  readonly #seen = new Map<string, ScopeEntry>();
  readonly #now: () => number;
  readonly #synced: () => boolean;
  /** The informer's handlers: each event recorded with nextScopeEntry at `now`. */
  readonly handlers: EventHandlers<KubernetesObject>;

  /** `now`: when a value is first seen; `synced`: whether the informer has listed once. */
  constructor(now: () => number, synced: () => boolean) {
    this.#now = now;
    this.#synced = synced;
    const observe = (ns: KubernetesObject, relisted: boolean): void => {
      const name = ns.metadata?.name ?? '';
      const next = nextScopeEntry(this.#seen.get(name), ns, relisted, this.#now());
      if (next === undefined) this.#seen.delete(name);
      else this.#seen.set(name, next);
    };
    this.handlers = {
      onAdd: (ns) => observe(ns, false),
      onUpdate: (_old, ns, relisted) => observe(ns, relisted),
      onDelete: (ns) => {
        this.#seen.delete(ns.metadata?.name ?? '');
      },
    };
  }

  /** In scope with its value, outside ('out'), or undefined before the first list. */
  entry(namespace: string): ScopeEntry | 'out' | undefined {
    if (!this.#synced()) return undefined;
    return this.#seen.get(namespace) ?? 'out';
  }
}

export interface NamespaceScopeOptions {
  transport: KubeRequester;
  /** When a value is first seen (the settle periods). Default: the real clock. */
  clock?: Clock;
  /** The informer's timeouts and backoff. Default: the real clock. */
  informerClock?: Clock;
  logger?: Logger;
  registry?: Registry;
}

export class NamespaceScope implements ScopeView {
  /** The namespaces in scope (label-selected: one that leaves the scope is a deletion here). */
  readonly informer: Informer<KubernetesObject>;
  readonly #transport: KubeRequester;
  readonly #clock: Clock;
  readonly #seen: ScopeObservations;

  constructor(options: NamespaceScopeOptions) {
    this.#transport = options.transport;
    this.#clock = options.clock ?? realClock;
    this.informer = new Informer<KubernetesObject>({
      name: 'admission-scope-namespaces',
      transport: options.transport,
      resource: NAMESPACES,
      labelSelector: `${SCOPE_LABEL} in (${SCOPE_ENABLED},${SCOPE_LEAVING})`,
      ...(options.informerClock ? { clock: options.informerClock } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
    });
    this.#seen = new ScopeObservations(
      () => this.#clock.now(),
      () => this.informer.hasSynced(),
    );
    this.informer.addEventHandler(this.#seen.handlers);
  }

  /** How this replica sees `namespace`: in scope with its value, outside ('out'), or undefined before the first list. */
  entry(namespace: string): ScopeEntry | 'out' | undefined {
    return this.#seen.entry(namespace);
  }

  cached(namespace: string): boolean | undefined {
    const e = this.entry(namespace);
    return e === undefined ? undefined : e !== 'out';
  }

  /** A live read (GET of the Namespace): whether it is in scope now. A gone namespace is not. */
  async live(namespace: string, signal?: AbortSignal): Promise<boolean> {
    try {
      const ns = await readJson<KubernetesObject>(
        await this.#transport.request({
          path: resourcePath(NAMESPACES, namespace),
          ...(signal ? { signal } : {}),
        }),
      );
      return inAdmissionScope(ns.metadata?.labels);
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }
}
