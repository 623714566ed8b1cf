// Which namespaces are in the opt-in workload admission scope, as the BerthLease controller sees them
// (docs/admission.md, "The admission scope"): an informer of the namespaces carrying the scope label, kept
// on every replica, which the controller watches (a namespace entering or leaving the scope reconciles
// its leases at once), and a live read for the moment a workload is about to be activated.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { isNotFound, readJson, resourcePath } from '../kube/client.ts';
import type { Clock } from '../kube/clock.ts';
import { Informer } from '../kube/informer.ts';
import type { KubeRequester } from '../kube/transport.ts';
import type { Logger } from '../observability/logger.ts';
import { inAdmissionScope, SCOPE_ENABLED, SCOPE_LABEL } from './api.ts';

const NAMESPACES = { version: 'v1', plural: 'namespaces' } as const;

export interface NamespaceScopeOptions {
  transport: KubeRequester;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
}

/** What the managed path asks of the scope (NamespaceScope; tests pass a fake). */
export interface ScopeView {
  /** From the cache: whether `namespace` is in scope; undefined until the cache has listed once. */
  cached(namespace: string): boolean | undefined;
  /** A live read: whether it is in scope now. */
  live(namespace: string, signal?: AbortSignal): Promise<boolean>;
}

export class NamespaceScope implements ScopeView {
  /** The namespaces in scope (label-selected: one that leaves the scope is a deletion here). */
  readonly informer: Informer<KubernetesObject>;
  readonly #transport: KubeRequester;

  constructor(options: NamespaceScopeOptions) {
    this.#transport = options.transport;
    this.informer = new Informer<KubernetesObject>({
      name: 'admission-scope-namespaces',
      transport: options.transport,
      resource: NAMESPACES,
      labelSelector: `${SCOPE_LABEL}=${SCOPE_ENABLED}`,
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.registry ? { registry: options.registry } : {}),
    });
  }

  /** From the cache: whether `namespace` is in scope; undefined until the informer has listed once. */
  cached(namespace: string): boolean | undefined {
    if (!this.informer.hasSynced()) return undefined;
    return this.informer.get(namespace) !== undefined;
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
