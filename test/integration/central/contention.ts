// Many holders contending for a few keys through several central replicas, and the check of the
// recorded history: at most one holder per key at any instant, no token reuse, no lost grant.
//
// Every replica runs in this process, so servers and clients share one clock (Date.now): the instants
// the servers report (acquiredAt, expiresAt) and the instants the holders record (release sent) are
// comparable without skew.

export interface Hold {
  key: string;
  holder: string;
  token: number;
  /** Server time the token was granted (acquiredAt of the grant). */
  start: number;
  /** Latest expiry any acquire/renew response confirmed for this token. */
  expiresAt: number;
  /** Client time the holder sent its release, if it did. */
  releasedAt?: number;
}

export interface ContentionOptions {
  holders: number;
  keys: number;
  /** Holders stop once every key has had this many holds, some released and some abandoned... */
  minHoldsPerKey: number;
  /** ...or when this much time has passed (the caller then sees too little activity). */
  maxDurationMs: number;
  ttlSeconds: number;
  /** Lease namespace used on the wire. */
  namespace?: string;
}

export interface ContentionResult {
  holds: Hold[];
  requests: number;
  /** Unexpected answers (5xx, bad bodies) and token reuse seen live. */
  problems: string[];
}

interface LeaseBody {
  acquired: boolean;
  holder?: string;
  fencingToken?: number;
  expiresAt: string;
  acquiredAt: string;
}

const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

export async function runContention(urls: string[], opts: ContentionOptions): Promise<ContentionResult> {
  const namespace = opts.namespace ?? 'contention';
  const keys = Array.from({ length: opts.keys }, (_, i) => `lease-${i}`);
  const holds = new Map<string, Hold>();
  const problems: string[] = [];
  let requests = 0;
  const deadline = Date.now() + opts.maxDurationMs;
  const perKey = new Map<string, number>();
  let released = 0;
  let abandoned = 0;
  const enough = (): boolean =>
    released > 0 && abandoned > 0 && keys.every((k) => (perKey.get(k) ?? 0) >= opts.minHoldsPerKey);

  async function call(
    op: string,
    key: string,
    body: object,
  ): Promise<{ status: number; body: LeaseBody | undefined }> {
    requests++;
    const res = await fetch(`${pick(urls)}/v1alpha1/namespaces/${namespace}/leases/${key}/${op}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status === 200) return { status: 200, body: JSON.parse(text) as LeaseBody };
    return { status: res.status, body: undefined };
  }

  function observe(key: string, holder: string, body: LeaseBody): Hold {
    const token = body.fencingToken ?? 0;
    const id = `${key}#${token}`;
    let hold = holds.get(id);
    if (hold === undefined) {
      hold = {
        key,
        holder,
        token,
        start: Date.parse(body.acquiredAt),
        expiresAt: Date.parse(body.expiresAt),
      };
      holds.set(id, hold);
      perKey.set(key, (perKey.get(key) ?? 0) + 1);
    } else if (hold.holder !== holder) {
      problems.push(`token ${token} of ${key} granted to ${hold.holder} and to ${holder}`);
    } else if (Date.parse(body.acquiredAt) !== hold.start) {
      problems.push(`token ${token} of ${key} granted twice (acquiredAt changed)`);
    }
    hold.expiresAt = Math.max(hold.expiresAt, Date.parse(body.expiresAt));
    return hold;
  }

  async function holderLoop(holder: string): Promise<void> {
    // Keys this holder abandoned: it stays away until they expired, or its next acquire would renew the
    // abandoned hold in place (same token) and the history would have no hold that ended by expiry.
    const abandonedUntil = new Map<string, number>();
    while (Date.now() < deadline && !enough()) {
      const free = keys.filter((k) => (abandonedUntil.get(k) ?? 0) < Date.now());
      if (free.length === 0) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        continue;
      }
      const key = pick(free);
      const got = await call('acquire', key, { holder, ttlSeconds: opts.ttlSeconds });
      if (got.status !== 200) {
        problems.push(`acquire ${key} by ${holder}: HTTP ${got.status}`);
        continue;
      }
      if (!got.body!.acquired) {
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      const hold = observe(key, holder, got.body!);
      if (Math.random() < 0.5) {
        const renewed = await call('renew', key, {
          holder,
          fencingToken: hold.token,
          ttlSeconds: opts.ttlSeconds,
        });
        if (renewed.status !== 200) problems.push(`renew ${key} by ${holder}: HTTP ${renewed.status}`);
        else if (renewed.body!.acquired) observe(key, holder, renewed.body!);
      }
      if (Math.random() < 0.6) {
        released++;
        hold.releasedAt ??= Date.now();
        requests++;
        const res = await fetch(`${pick(urls)}/v1alpha1/namespaces/${namespace}/leases/${key}/release`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ holder, fencingToken: hold.token }),
        });
        await res.arrayBuffer();
        // 409: our lease had expired and was taken meanwhile.
        if (res.status !== 204 && res.status !== 409)
          problems.push(`release ${key} by ${holder}: HTTP ${res.status}`);
      } else {
        // Abandoned: it must expire (or be collected) before anyone else gets it.
        abandoned++;
        abandonedUntil.set(key, hold.expiresAt);
      }
    }
  }

  await Promise.all(Array.from({ length: opts.holders }, (_, i) => holderLoop(`holder-${i}`)));
  return { holds: [...holds.values()], requests, problems };
}

/**
 * Violations of the lease guarantees in a recorded history. For consecutive tokens of a key, the next
 * grant must start no earlier than the previous hold ended: its release (if sent before it expired),
 * otherwise strictly after its last confirmed expiry. Tokens of a key must be exactly 1..n: none
 * repeated (checked live), none skipped (every reclaim is a grant someone received).
 */
export function historyViolations(holds: readonly Hold[]): string[] {
  const violations: string[] = [];
  const byKey = new Map<string, Hold[]>();
  for (const h of holds) byKey.set(h.key, [...(byKey.get(h.key) ?? []), h]);
  for (const [key, list] of byKey) {
    list.sort((a, b) => a.token - b.token);
    list.forEach((h, i) => {
      if (h.token !== i + 1)
        violations.push(`${key}: token ${i + 1} was never granted (next seen: ${h.token})`);
    });
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1]!;
      const next = list[i]!;
      const releasedInTime = prev.releasedAt !== undefined && prev.releasedAt <= prev.expiresAt;
      const earliest = releasedInTime ? prev.releasedAt! : prev.expiresAt + 1;
      if (next.start < earliest)
        violations.push(
          `${key}: token ${next.token} (${next.holder}) granted at ${next.start}, while token ${prev.token} (${prev.holder}) ` +
            `held until ${releasedInTime ? `its release at ${prev.releasedAt}` : `its expiry at ${prev.expiresAt}`}`,
        );
    }
  }
  return violations;
}
