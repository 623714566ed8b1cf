// The switch from the cluster-wide registration to the opt-in scope (docs/admission.md, "Upgrading to the
// opt-in scope"). Before the leader writes a workload webhook configuration whose selector is narrower than
// the live one (a live configuration without the scope term, or none at all: a Go operator may have left
// stamped objects behind), every namespace that holds a BerthLease with a target or a stamped object is
// labelled into the scope. When it labelled any, it waits `settleMs` before the narrowed selector is
// written: kube-apiserver matches selectors against its own cache of namespace labels, and the labels must
// be in it first, or a managed Pod created during the switch could skip admission.
//
// The label is added with a merge patch of that one key (nothing else of the namespace is written); the
// install limits the operator's namespace writes to exactly that (docs/admission.md, "Who may change the
// scope").
import type { KubernetesObject, V1LabelSelector } from '@kubernetes/client-node';
import {
  GROUP,
  inAdmissionScope,
  MANAGED_UID,
  PLURAL,
  SCOPE_ENABLED,
  SCOPE_LABEL,
  VERSION,
} from '../src/berth/api.ts';
import { readJson, resourcePath } from '../src/kube/client.ts';
import { type Clock, realClock } from '../src/kube/clock.ts';
import type { KubeRequester } from '../src/kube/transport.ts';
import type { Logger } from '../src/observability/logger.ts';
import { KINDS } from '../src/workloads/model.ts';
import { STAMPED_KINDS } from './scope.ts';

/** Default wait between labelling namespaces and narrowing the selectors. */
export const DEFAULT_SCOPE_SETTLE_MS = 5_000;

const NAMESPACES = { version: 'v1', plural: 'namespaces' } as const;

/** Whether a selector already restricts to the opt-in scope (its `SCOPE_LABEL In [enabled]` term). */
export function selectsScope(selector: V1LabelSelector | undefined): boolean {
  return (selector?.matchExpressions ?? []).some(
    (e) =>
      e.key === SCOPE_LABEL &&
      e.operator === 'In' &&
      (e.values ?? []).length === 1 &&
      e.values?.[0] === SCOPE_ENABLED,
  );
}

interface Listed {
  items?: Array<KubernetesObject & { spec?: { target?: unknown } }>;
}

export interface ScopeMigrationOptions {
  transport: KubeRequester;
  settleMs?: number;
  clock?: Clock;
  logger?: Logger;
}

export class ScopeMigration {
  readonly #transport: KubeRequester;
  readonly #settleMs: number;
  readonly #clock: Clock;
  readonly #log: Logger | undefined;
  /** The migration in flight: the two configurations' writes share one. */
  #running: Promise<string[]> | undefined;
  /** No narrowed selector is written before this instant (the last labels' settle). */
  #settledAt = 0;

  constructor(options: ScopeMigrationOptions) {
    this.#transport = options.transport;
    this.#settleMs = options.settleMs ?? DEFAULT_SCOPE_SETTLE_MS;
    this.#clock = options.clock ?? realClock;
    this.#log = options.logger;
  }

  /**
   * Before writing `webhooks` over `live` (undefined: not registered yet): brings the namespaces that
   * need it into scope first, when the write narrows the selector. Errors abort the write.
   */
  async beforeWrite(
    live: { webhooks?: Array<{ namespaceSelector?: V1LabelSelector }> } | undefined,
    webhooks: ReadonlyArray<{ namespaceSelector?: V1LabelSelector }>,
    signal?: AbortSignal,
  ): Promise<void> {
    const narrows = webhooks.some((w) => selectsScope(w.namespaceSelector));
    const liveScoped =
      live !== undefined && (live.webhooks ?? []).some((w) => selectsScope(w.namespaceSelector));
    if (!narrows || liveScoped) return;
    this.#running ??= this.migrate(signal).finally(() => {
      this.#running = undefined;
    });
    await this.#running;
    const wait = this.#settledAt - this.#clock.now();
    if (wait > 0) await this.#clock.sleep(wait, signal);
  }

  /** Labels every namespace holding a BerthLease with a target or a stamped object; returns those it labelled. */
  async migrate(signal?: AbortSignal): Promise<string[]> {
    const holders = await this.#holders(signal);
    const inScope = new Set(
      (await this.#list(resourcePath(NAMESPACES), `${SCOPE_LABEL}=${SCOPE_ENABLED}`, signal)).map(
        (ns) => ns.metadata?.name ?? '',
      ),
    );
    const labelled: string[] = [];
    for (const namespace of [...holders].sort()) {
      if (inScope.has(namespace)) continue;
      const written = await readJson<KubernetesObject>(
        await this.#transport.request({
          method: 'PATCH',
          path: resourcePath(NAMESPACES, namespace),
          body: { metadata: { labels: { [SCOPE_LABEL]: SCOPE_ENABLED } } },
          contentType: 'application/merge-patch+json',
          ...(signal ? { signal } : {}),
        }),
      );
      if (!inAdmissionScope(written.metadata?.labels))
        throw new Error(`namespace ${namespace} was not labelled`);
      labelled.push(namespace);
    }
    if (labelled.length > 0) this.#settledAt = this.#clock.now() + this.#settleMs;
    if (labelled.length > 0)
      this.#log?.info(
        { namespaces: labelled },
        'namespaces holding managed workloads brought into the workload admission scope',
      );
    return labelled;
  }

  /** The namespaces that hold a BerthLease with a target or an object with a lease's stamp. */
  async #holders(signal?: AbortSignal): Promise<Set<string>> {
    const leases = await this.#list(
      resourcePath({ group: GROUP, version: VERSION, plural: PLURAL }),
      undefined,
      signal,
    );
    const stamped = await Promise.all(
      STAMPED_KINDS.map((kind) => {
        const { group, version, plural } = KINDS[kind];
        return this.#list(resourcePath({ group, version, plural }), MANAGED_UID, signal);
      }),
    );
    const namespaces = new Set<string>();
    for (const lease of leases)
      if (lease.spec?.target !== undefined) namespaces.add(lease.metadata?.namespace ?? '');
    for (const o of stamped.flat()) namespaces.add(o.metadata?.namespace ?? '');
    namespaces.delete('');
    return namespaces;
  }

  async #list(
    path: string,
    labelSelector: string | undefined,
    signal?: AbortSignal,
  ): Promise<NonNullable<Listed['items']>> {
    const body = await readJson<Listed>(
      await this.#transport.request({ path, query: { labelSelector }, ...(signal ? { signal } : {}) }),
    );
    return body.items ?? [];
  }
}
