// The switch from the cluster-wide registration to the opt-in scope (docs/admission.md, "Upgrading to the
// opt-in scope"), as a plan for each write of the registration (registration.ts `plan`). While a live
// configuration is not narrowed yet, the leader:
//   1. labels every namespace that holds a BerthLease with a target or a stamped object `enabled` (a merge
//      patch of that one key; the installs' admission policy lets the operator write nothing else);
//   2. writes the configurations with the scope's guards but the workload webhooks still selecting every
//      namespace, so nothing managed leaves review while the guards spread to every kube-apiserver;
//   3. narrows the selectors only two settle periods after it first saw the guards live (one for them to
//      reach every kube-apiserver, one for its own view of the scope, namespace-scope.ts, to show a label
//      removed while they had not), and once that view has shown every holder's namespace in scope for
//      SCOPE_SETTLE_MS, labelling again (and waiting again) any holder whose label went meanwhile. The
//      view, not the time of its own write: a label removed and set again while the guards spread counts
//      from when it came back (docs/verification.md, "the upgrade narrows on an unseen label").
// Without any live configuration and without any holder (a first install) it narrows at once: there is
// nothing to keep in review.
import type { KubernetesObject, V1LabelSelector } from '@kubernetes/client-node';
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
} from '../src/berth/api.ts';
import { readJson, resourcePath } from '../src/kube/client.ts';
import { type Clock, realClock } from '../src/kube/clock.ts';
import type { KubeRequester } from '../src/kube/transport.ts';
import type { Logger } from '../src/observability/logger.ts';
import { KINDS } from '../src/workloads/model.ts';
import { type ScopeEntries, STAMPED_KINDS } from './scope.ts';

const NAMESPACES = { version: 'v1', plural: 'namespaces' } as const;

interface Selected {
  name?: string;
  namespaceSelector?: V1LabelSelector;
}

/** Whether a selector restricts to the opt-in scope (its `SCOPE_LABEL In [...]` term). */
export function selectsScope(selector: V1LabelSelector | undefined): boolean {
  return (selector?.matchExpressions ?? []).some((e) => e.key === SCOPE_LABEL && e.operator === 'In');
}

/** `webhooks` with the scope term taken out of every selector: every namespace but the excluded ones. */
export function widened<W extends Selected>(webhooks: readonly W[]): W[] {
  return webhooks.map((w) =>
    selectsScope(w.namespaceSelector)
      ? {
          ...w,
          namespaceSelector: {
            ...w.namespaceSelector,
            matchExpressions: (w.namespaceSelector?.matchExpressions ?? []).filter(
              (e) => !(e.key === SCOPE_LABEL && e.operator === 'In'),
            ),
          },
        }
      : w,
  );
}

const hasGuards = (webhooks: readonly Selected[]): boolean =>
  [LEASE_SCOPE_WEBHOOK, NAMESPACE_SCOPE_WEBHOOK].every((name) => webhooks.some((w) => w.name === name));

export interface PlanInput<W extends Selected> {
  /** The live configuration's webhooks; undefined when it does not exist. */
  live: readonly W[] | undefined;
  /** The webhooks as built (with the CA bundle). */
  want: readonly W[];
}

export interface Plan<W> {
  webhooks: W[];
  /** Look again this soon (the settle period still running). */
  requeueAfterMs?: number;
}

interface Listed {
  items?: Array<KubernetesObject & { spec?: { target?: unknown } }>;
}

export interface ScopeMigrationOptions {
  transport: KubeRequester;
  /** The leader's view of the scope's namespaces. */
  scope: ScopeEntries;
  clock?: Clock;
  logger?: Logger;
}

export class ScopeMigration {
  readonly #transport: KubeRequester;
  readonly #scope: ScopeEntries;
  readonly #clock: Clock;
  readonly #log: Logger | undefined;
  /** When this leader first saw the guards live. */
  #guardsSince: number | undefined;
  /** The labelling in flight: the two configurations' plans share one. */
  #running: Promise<Set<string>> | undefined;

  constructor(options: ScopeMigrationOptions) {
    this.#transport = options.transport;
    this.#scope = options.scope;
    this.#clock = options.clock ?? realClock;
    this.#log = options.logger;
  }

  /** What to write in place of `want` now (see the header), after labelling where needed. */
  async plan<W extends Selected>(input: PlanInput<W>, signal?: AbortSignal): Promise<Plan<W>> {
    const want = [...input.want];
    const narrows = want.some((w) => selectsScope(w.namespaceSelector));
    const live = input.live;
    if (!narrows || live?.some((w) => selectsScope(w.namespaceSelector))) return { webhooks: want };
    // Read before the LISTs: the settle periods then cover this plan's own requests too.
    const now = this.#clock.now();
    this.#running ??= this.#label(signal).finally(() => {
      this.#running = undefined;
    });
    const holders = await this.#running;
    if (live === undefined && holders.size === 0 && this.#guardsSince === undefined)
      return { webhooks: want };
    if (hasGuards(want)) {
      // The validating configuration: the guards go out first; their settle period starts once seen live.
      if (live === undefined || !hasGuards(live))
        return { webhooks: widened(want), requeueAfterMs: SCOPE_SETTLE_MS };
      this.#guardsSince ??= now;
    }
    const ready = this.#readyAt(holders);
    if (ready !== undefined && now >= ready) return { webhooks: want };
    return { webhooks: widened(want), requeueAfterMs: ready === undefined ? SCOPE_SETTLE_MS : ready - now };
  }

  /** When the selectors may narrow: undefined while the guards or a holder's namespace are not seen in scope. */
  #readyAt(holders: ReadonlySet<string>): number | undefined {
    if (this.#guardsSince === undefined) return undefined;
    let ready = this.#guardsSince + 2 * SCOPE_SETTLE_MS;
    for (const namespace of holders) {
      const seen = this.#scope.entry(namespace);
      if (seen === undefined || seen === 'out') return undefined;
      ready = Math.max(ready, seen.since + SCOPE_SETTLE_MS);
    }
    return ready;
  }

  async #label(signal?: AbortSignal): Promise<Set<string>> {
    const holders = await this.#holders(signal);
    const inScope = new Set(
      (
        await this.#list(
          resourcePath(NAMESPACES),
          `${SCOPE_LABEL} in (${SCOPE_ENABLED},${SCOPE_LEAVING})`,
          signal,
        )
      ).map((ns) => ns.metadata?.name ?? ''),
    );
    const labelled: string[] = [];
    for (const namespace of [...holders].sort()) {
      if (inScope.has(namespace)) continue;
      await readJson<KubernetesObject>(
        await this.#transport.request({
          method: 'PATCH',
          path: resourcePath(NAMESPACES, namespace),
          body: { metadata: { labels: { [SCOPE_LABEL]: SCOPE_ENABLED } } },
          contentType: 'application/merge-patch+json',
          ...(signal ? { signal } : {}),
        }),
      );
      labelled.push(namespace);
    }
    if (labelled.length > 0)
      this.#log?.info(
        { namespaces: labelled },
        'namespaces holding managed workloads brought into the workload admission scope',
      );
    return holders;
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
