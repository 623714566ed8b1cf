// Fault injection, driven by tests through the sandbox handle: failing or slow requests, dropped and
// silent watches, history compaction (forcing 410 Gone).

export interface FaultRequest {
  verb: string;
  group: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
  user: string;
}

export interface FaultRule {
  /** Kubernetes verbs (get, list, watch, create, update, patch, delete, deletecollection); all when absent. */
  verbs?: string[];
  group?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  user?: string;
  /** Answer with this HTTP status and a Status body (reason derived from the code unless given). */
  status?: number;
  reason?: string;
  message?: string;
  retryAfterSeconds?: number;
  /** Delay before handling (or before answering with `status`). */
  delayMs?: number;
  /** Destroy the connection without an answer. */
  resetConnection?: boolean;
  /** How many requests the rule applies to; unlimited when absent. */
  times?: number;
}

export interface FaultHandle {
  remove(): void;
  /** Requests the rule has applied to so far. */
  hits(): number;
}

export interface WatchFilter {
  group?: string;
  resource?: string;
  namespace?: string;
}

export interface WatchConnection {
  group: string;
  resource: string;
  namespace: string;
  silent: boolean;
  drop(): void;
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  410: 'Expired',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

export const reasonForCode = (code: number): string => REASONS[code] ?? 'Unknown';

interface ActiveRule {
  rule: FaultRule;
  hits: number;
}

function matches(rule: FaultRule, req: FaultRequest): boolean {
  if (rule.verbs && !rule.verbs.includes(req.verb)) return false;
  if (rule.group !== undefined && rule.group !== req.group) return false;
  if (rule.resource !== undefined && rule.resource !== req.resource) return false;
  if (rule.subresource !== undefined && rule.subresource !== req.subresource) return false;
  if (rule.namespace !== undefined && rule.namespace !== req.namespace) return false;
  if (rule.name !== undefined && rule.name !== req.name) return false;
  if (rule.user !== undefined && rule.user !== req.user) return false;
  return true;
}

const watchMatches = (f: WatchFilter, c: WatchConnection): boolean =>
  (f.group === undefined || f.group === c.group) &&
  (f.resource === undefined || f.resource === c.resource) &&
  (f.namespace === undefined || f.namespace === c.namespace);

export class Faults {
  private readonly rules: ActiveRule[] = [];
  readonly watches = new Set<WatchConnection>();
  private readonly compactor: () => void;

  constructor(compactor: () => void) {
    this.compactor = compactor;
  }

  inject(rule: FaultRule): FaultHandle {
    const active: ActiveRule = { rule, hits: 0 };
    this.rules.push(active);
    return {
      remove: () => {
        const i = this.rules.indexOf(active);
        if (i >= 0) this.rules.splice(i, 1);
      },
      hits: () => active.hits,
    };
  }

  clear(): void {
    this.rules.length = 0;
    for (const w of this.watches) w.silent = false;
  }

  /** The first matching rule, counted as applied (and retired once its `times` are used up). */
  take(req: FaultRequest): FaultRule | undefined {
    for (let i = 0; i < this.rules.length; i++) {
      const active = this.rules[i]!;
      if (!matches(active.rule, req)) continue;
      active.hits++;
      if (active.rule.times !== undefined && active.hits >= active.rule.times) this.rules.splice(i, 1);
      return active.rule;
    }
    return undefined;
  }

  /** Closes matching watch streams abruptly (a reset connection). Returns how many were dropped. */
  dropWatches(filter: WatchFilter = {}): number {
    let n = 0;
    for (const w of [...this.watches]) {
      if (!watchMatches(filter, w)) continue;
      w.drop();
      n++;
    }
    return n;
  }

  /** Keeps matching watch streams open but delivers nothing on them until undone (or cleared). */
  silenceWatches(filter: WatchFilter = {}): () => void {
    const affected = [...this.watches].filter((w) => watchMatches(filter, w));
    for (const w of affected) w.silent = true;
    return () => {
      for (const w of affected) w.silent = false;
    };
  }

  activeWatches(filter: WatchFilter = {}): number {
    return [...this.watches].filter((w) => watchMatches(filter, w)).length;
  }

  /** Forgets the change history, so watches from any older resourceVersion get 410 Gone. */
  compact(): void {
    this.compactor();
  }
}
