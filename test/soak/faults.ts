// Random faults of a soak run, each removed after a while: per cluster, Kubernetes API faults on the
// operator's own requests (500/503, 429 with Retry-After, 409 on writes, responses slower than the
// reconcile deadline, connection resets) plus dropped watches and compacted history (410 Gone), central
// faults on that cluster's front (down, reset, slow, 500, garbage JSON, a token that went backwards, a
// wrong holder), or the operator process killed (SIGKILL, as an OOM kill or a node loss would; the
// world restarts it, as the kubelet would).
//
// The fault model stays inside what the operator promises (docs/behaviour.md §7, timing.ts):
// - it cannot fence a workload while its own API server is unusable, so a cluster never has two faults
//   at once, and after an API fault its API stays quiet for as long as the longest API fault;
// - an API fault (2-6 s, slow requests by at most 4 s) ends before the leader's renew deadline; a crash
//   (in the first quarter of a run) kills it: the lease TTL (timing.ts) outlasts the failover to its
//   successor, even one that meets an API fault on its way; the cluster has no other fault for the
//   failover bound after a crash;
// - central faults last 2 s to TTL + 10 s: beyond the TTL the holder must stop at its local deadline and
//   the other cluster takes over.
import type { FaultRule } from '../helpers/api-proxy.ts';
import type { CentralFault } from '../helpers/central-faults.ts';
import { OPERATOR_USER } from '../integration/managed/harness.ts';
import type { Random } from './random.ts';
import { API_FAULT_MAX_MS, API_SLOW_MAX_MS, CENTRAL_FAULT_MAX_MS, FAILOVER_BOUND_MS } from './timing.ts';
import type { Site } from './world.ts';

/** Of the faults a cluster gets, the share that kills its operator. */
const CRASH_SHARE = 0.05;

const VERBS = ['get', 'list', 'create', 'update', 'patch', 'delete'];

interface Active {
  what: string;
  until: number;
  /** After it, the cluster stays without a fault until then (an API fault's quiet gap). */
  quietMs: number;
  remove(): Promise<void>;
}

export class FaultInjector {
  readonly counts: Record<string, number> = {};
  readonly #sites: Site[];
  readonly #random: Random;
  /** One fault at a time per cluster (API or central, see above). */
  readonly #active = new Map<string, Active>();
  /** Per cluster, the end of the quiet gap after its last fault. */
  readonly #quietUntil = new Map<string, number>();

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

  /**
   * Removes what has lasted long enough; gives each idle cluster a new fault with probability `p`, which
   * may be a crash while `crashes` holds.
   */
  async tick(p: number, crashes: boolean): Promise<void> {
    const now = Date.now();
    for (const [channel, active] of this.#active)
      if (active.until <= now) {
        this.#active.delete(channel);
        this.#quietUntil.set(channel, now + active.quietMs);
        await active.remove();
        this.#log(`fault removed: ${active.what}`);
      }
    for (const site of this.#sites) {
      if (this.#active.has(site.name) || now < (this.#quietUntil.get(site.name) ?? 0)) continue;
      if (!this.#random.chance(p)) continue;
      if (crashes && this.#random.chance(CRASH_SHARE)) this.#crash(site, now);
      else if (this.#random.chance(0.5)) await this.#api(site, now);
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

  /** The operator killed; nothing else happens to its cluster until a successor can have taken over. */
  #crash(site: Site, now: number): void {
    if (site.operator.hasExited()) return;
    this.#count('operator-crash');
    site.operator.kill('SIGKILL');
    this.#active.set(site.name, {
      what: `${site.name} operator-crash`,
      until: now + FAILOVER_BOUND_MS,
      quietMs: 0,
      remove: async () => {},
    });
    this.#log(`fault: ${site.name} operator-crash (SIGKILL)`);
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
      ['api-slow', () => ({ ...base, delayMs: r.int(3_000, API_SLOW_MAX_MS) })],
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
    const duration = this.#random.int(2_000, kind === 'api' ? API_FAULT_MAX_MS : CENTRAL_FAULT_MAX_MS);
    this.#active.set(channel, {
      what,
      until: now + duration,
      quietMs: kind === 'api' ? API_FAULT_MAX_MS : 0,
      remove,
    });
    this.#log(`fault: ${what} for ${(duration / 1000).toFixed(1)} s`);
  }
}
