// Random faults of a soak run, each removed after a while: per cluster, Kubernetes API faults on the
// operator's own requests (500/503, 429 with Retry-After, 409 on writes, responses slower than the
// reconcile deadline, connection resets) plus dropped watches and compacted history (410 Gone), or
// central faults on that cluster's front (down, reset, slow, 500, garbage JSON, a token that went
// backwards, a wrong holder).
//
// The fault model stays inside what the operator promises (docs/behaviour.md §7): it cannot fence
// a workload while its own API server is unusable, so a cluster never has an API fault and a central
// fault at once, and an API fault (2-6 s, requests delayed by at most 6 s) always ends well within the
// soak's 15 s lease TTL, so a holder whose API recovers renews in time. Central faults last 2-25 s:
// beyond the TTL the holder must stop at its local deadline and the other cluster takes over.
import type { FaultRule } from '../helpers/api-proxy.ts';
import type { CentralFault } from '../helpers/central-faults.ts';
import { OPERATOR_USER } from '../integration/managed/harness.ts';
import type { Random } from './random.ts';
import type { Site } from './world.ts';

const VERBS = ['get', 'list', 'create', 'update', 'patch', 'delete'];

interface Active {
  what: string;
  until: number;
  remove(): Promise<void>;
}

export class FaultInjector {
  readonly counts: Record<string, number> = {};
  readonly #sites: Site[];
  readonly #random: Random;
  /** One fault at a time per cluster (API or central, see above). */
  readonly #active = new Map<string, Active>();

  readonly #log: (line: string) => void;

  constructor(sites: Site[], random: Random, log: (line: string) => void) {
    this.#sites = sites;
    this.#random = random;
    this.#log = log;
  }

  /** The faults in force, e.g. `east api-500 (get,list)`. */
  active(): string[] {
    return [...this.#active.values()].map((a) => a.what);
  }

  /** Removes what has lasted long enough; gives each idle cluster a new fault with probability `p`. */
  async tick(p: number): Promise<void> {
    const now = Date.now();
    for (const [channel, active] of this.#active)
      if (active.until <= now) {
        this.#active.delete(channel);
        await active.remove();
        this.#log(`fault removed: ${active.what}`);
      }
    for (const site of this.#sites) {
      if (this.#active.has(site.name) || !this.#random.chance(p)) continue;
      if (this.#random.chance(0.5)) await this.#api(site, now);
      else await this.#central(site, now);
    }
  }

  /** Removes every fault in force. */
  async clear(): Promise<void> {
    for (const active of this.#active.values()) await active.remove();
    this.#active.clear();
    for (const site of this.#sites) site.cluster.proxy.clear();
  }

  #count(kind: string): void {
    this.counts[kind] = (this.counts[kind] ?? 0) + 1;
  }

  #duration(kind: 'api' | 'central'): number {
    return kind === 'api' ? this.#random.int(2_000, 6_000) : this.#random.int(2_000, 25_000);
  }

  async #api(site: Site, now: number): Promise<void> {
    const proxy = site.cluster.proxy;
    const r = this.#random;
    const verbs = VERBS.filter(() => r.chance(0.5));
    const base: FaultRule = { user: OPERATOR_USER, ...(verbs.length > 0 ? { verbs } : {}) };
    const kinds: Array<[string, () => FaultRule | Promise<undefined> | undefined]> = [
      ['api-500', () => ({ ...base, status: 500 })],
      ['api-503', () => ({ ...base, status: 503 })],
      ['api-429', () => ({ ...base, status: 429, retryAfterSeconds: 1 })],
      ['api-409', () => ({ user: OPERATOR_USER, verbs: ['update', 'patch'], status: 409 })],
      ['api-slow', () => ({ ...base, delayMs: r.int(3_000, 6_000) })],
      ['api-reset', () => ({ ...base, resetConnection: true })],
      [
        'api-drop-watches',
        () => {
          proxy.dropWatches();
          return undefined;
        },
      ],
      [
        'api-compact',
        // As an etcd compaction: watches from older versions get 410 Expired from now on.
        async () => {
          await proxy.expireHistory();
          return undefined;
        },
      ],
    ];
    const [kind, make] = r.pick(kinds);
    this.#count(kind);
    const rule = await make();
    if (rule === undefined) {
      this.#log(`fault: ${site.name} ${kind}`);
      return;
    }
    const handle = proxy.inject(rule);
    const scope = rule.verbs?.join(',') ?? 'all verbs';
    this.#start(site.name, 'api', `${site.name} ${kind} (${scope})`, now, async () => handle.remove());
  }

  async #central(site: Site, now: number): Promise<void> {
    const fault: CentralFault = this.#random.pick<CentralFault>([
      { kind: 'down' },
      { kind: 'reset' },
      { kind: 'slow', delayMs: 3_000 },
      { kind: 'status', status: 500 },
      { kind: 'garbage' },
      { kind: 'token-backwards' },
      { kind: 'wrong-holder', holder: 'cluster-elsewhere' },
    ]);
    this.#count(`central-${fault.kind}`);
    await site.front.set(fault);
    this.#start(site.name, 'central', `${site.name} central-${fault.kind}`, now, () => site.front.clear());
  }

  #start(
    channel: string,
    kind: 'api' | 'central',
    what: string,
    now: number,
    remove: () => Promise<void>,
  ): void {
    const duration = this.#duration(kind);
    this.#active.set(channel, { what, until: now + duration, remove });
    this.#log(`fault: ${what} for ${(duration / 1000).toFixed(1)} s`);
  }
}
