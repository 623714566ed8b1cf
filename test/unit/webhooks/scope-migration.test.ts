// The switch to the opt-in scope (webhooks/scope-migration.ts), against an in-memory API: holders labelled
// first; the guards out with the workload selectors still cluster-wide; the selectors narrowed only once
// the guards have been seen live, and every holder's namespace seen in scope, for the settle period; a
// holder whose label went meanwhile labelled again, and waited for again, also when a user set it again;
// a first install without holders narrowed at once. The real control plane's version:
// test/e2e/upgrade.test.ts.
import { describe, expect, it } from 'vitest';
import {
  MANAGED_UID,
  SCOPE_ENABLED,
  SCOPE_LABEL,
  SCOPE_LEAVING,
  SCOPE_SETTLE_MS,
} from '../../../src/berth/api.ts';
import type { ScopeEntry } from '../../../src/berth/namespace-scope.ts';
import { ManualClock } from '../../../src/kube/clock.ts';
import type { KubeRequester, RawRequest, RawResponse } from '../../../src/kube/transport.ts';
import {
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
} from '../../../webhooks/configurations.ts';
import type { ScopeEntries } from '../../../webhooks/scope.ts';
import { ScopeMigration, selectsScope, widened } from '../../../webhooks/scope-migration.ts';

const params = { namespace: 'berth-system', scope: 'opt-in' } as const;
const M = mutatingWebhookConfiguration(params).webhooks!;
const V = validatingWebhookConfiguration(params).webhooks!;
const WIDE_M = mutatingWebhookConfiguration({ ...params, scope: 'all' }).webhooks!;
const WIDE_V = validatingWebhookConfiguration({ ...params, scope: 'all' }).webhooks!;

/**
 * Namespaces (name -> scope label or ''), stamped Deployments by namespace; records the patches. Also the
 * leader's view of the scope, as an informer without lag: since when each namespace has shown its value.
 */
class FakeCluster implements KubeRequester, ScopeEntries {
  readonly namespaces = new Map<string, string>();
  readonly stamped = new Set<string>();
  readonly patches: string[] = [];
  readonly #since = new Map<string, number>();
  readonly clock: ManualClock;
  constructor(clock: ManualClock) {
    this.clock = clock;
  }

  label(name: string, value: string): void {
    if (this.namespaces.get(name) !== value) this.#since.set(name, this.clock.now());
    this.namespaces.set(name, value);
  }

  entry(name: string): ScopeEntry | 'out' {
    const value = this.namespaces.get(name);
    if (value !== SCOPE_ENABLED && value !== SCOPE_LEAVING) return 'out';
    return { value, since: this.#since.get(name) ?? 0, resourceVersion: '1' };
  }

  async request(req: RawRequest): Promise<RawResponse> {
    const answer = (body: unknown): RawResponse => ({
      status: 200,
      headers: {},
      text: async () => JSON.stringify(body),
      stream: () => null,
    });
    if (req.method === 'PATCH') {
      const name = req.path.split('/').at(-1)!;
      this.patches.push(name);
      this.label(name, 'enabled');
      return answer({ metadata: { name } });
    }
    if (req.path === '/api/v1/namespaces')
      return answer({
        items: [...this.namespaces]
          .filter(([, v]) => v === 'enabled' || v === 'leaving')
          .map(([name, v]) => ({ metadata: { name, labels: { [SCOPE_LABEL]: v } } })),
      });
    if (req.path === '/apis/apps/v1/deployments' && req.query?.labelSelector === MANAGED_UID)
      return answer({
        items: [...this.stamped].map((namespace) => ({ metadata: { namespace, name: 'web' } })),
      });
    return answer({ items: [] });
  }
}

describe('widened', () => {
  it('takes the scope term out of the workload selectors and leaves the guards as they are', () => {
    expect(widened(M)).toEqual(WIDE_M);
    expect(widened(V)).toEqual([WIDE_V[0], V[1], V[2]]);
    expect(M.every((w) => selectsScope(w.namespaceSelector))).toBe(true);
    expect(widened(V).some((w) => selectsScope(w.namespaceSelector))).toBe(false);
  });
});

describe('the plan of each write', () => {
  const start = () => {
    const clock = new ManualClock(0);
    const api = new FakeCluster(clock);
    return { clock, api, migration: new ScopeMigration({ transport: api, scope: api, clock }) };
  };

  it('a first install without any holder narrows at once', async () => {
    const { migration } = start();
    expect(await migration.plan({ live: undefined, want: V })).toEqual({ webhooks: V });
    expect(await migration.plan({ live: undefined, want: M })).toEqual({ webhooks: M });
  });

  it('an upgrade: labels, guards first, narrows two settle periods after the guards, the labels seen settled', async () => {
    const { clock, api, migration } = start();
    api.label('shop', '');
    api.stamped.add('shop');
    // The mutating configuration cannot narrow before the guards are out.
    expect(await migration.plan({ live: WIDE_M, want: M })).toEqual({
      webhooks: WIDE_M,
      requeueAfterMs: SCOPE_SETTLE_MS,
    });
    expect(api.patches).toEqual(['shop']);
    expect(await migration.plan({ live: WIDE_V, want: V })).toEqual({
      webhooks: widened(V),
      requeueAfterMs: SCOPE_SETTLE_MS,
    });
    // The guards' two settle periods start when they are seen live, not when they were sent.
    clock.advance(1);
    expect(await migration.plan({ live: widened(V), want: V })).toEqual({
      webhooks: widened(V),
      requeueAfterMs: 2 * SCOPE_SETTLE_MS,
    });
    clock.advance(2 * SCOPE_SETTLE_MS - 1);
    expect((await migration.plan({ live: WIDE_M, want: M })).requeueAfterMs).toBe(1);
    clock.advance(1);
    expect(await migration.plan({ live: widened(V), want: V })).toEqual({ webhooks: V });
    expect(await migration.plan({ live: WIDE_M, want: M })).toEqual({ webhooks: M });
    // Narrowed: nothing more is read or written.
    api.label('shop', '');
    expect(await migration.plan({ live: M, want: M })).toEqual({ webhooks: M });
    expect(api.patches).toEqual(['shop']);
  });

  it('a holder whose label went before the selectors narrowed is labelled again, and waited for again', async () => {
    const { clock, api, migration } = start();
    api.stamped.add('shop');
    await migration.plan({ live: WIDE_V, want: V });
    await migration.plan({ live: widened(V), want: V });
    clock.advance(2 * SCOPE_SETTLE_MS - 1_000);
    // An admin removes the label through a kube-apiserver that has not seen the guards yet.
    api.label('shop', '');
    expect((await migration.plan({ live: widened(V), want: V })).webhooks).toEqual(widened(V));
    expect(api.patches).toEqual(['shop', 'shop']);
    clock.advance(1_000);
    expect((await migration.plan({ live: widened(V), want: V })).requeueAfterMs).toBe(
      SCOPE_SETTLE_MS - 1_000,
    );
    clock.advance(SCOPE_SETTLE_MS);
    expect(await migration.plan({ live: widened(V), want: V })).toEqual({ webhooks: V });
  });

  it('a label removed and set again by a user counts from when it came back', async () => {
    // The trace of docs/verification.md ("the upgrade narrows on an unseen label"): the leader finds the
    // namespace in scope and labels nothing, yet a kube-apiserver may still show the removal.
    const { clock, api, migration } = start();
    api.stamped.add('shop');
    await migration.plan({ live: WIDE_V, want: V });
    await migration.plan({ live: widened(V), want: V });
    clock.advance(2 * SCOPE_SETTLE_MS - 1_000);
    api.label('shop', '');
    api.label('shop', 'enabled');
    clock.advance(1_000);
    expect(await migration.plan({ live: widened(V), want: V })).toEqual({
      webhooks: widened(V),
      requeueAfterMs: SCOPE_SETTLE_MS - 1_000,
    });
    expect(api.patches).toEqual(['shop']);
    clock.advance(SCOPE_SETTLE_MS - 1_000);
    expect(await migration.plan({ live: widened(V), want: V })).toEqual({ webhooks: V });
  });

  it('waits while its view does not show a holder in scope', async () => {
    const clock = new ManualClock(0);
    const api = new FakeCluster(clock);
    const migration = new ScopeMigration({ transport: api, scope: { entry: () => 'out' }, clock });
    api.stamped.add('shop');
    await migration.plan({ live: WIDE_V, want: V });
    clock.advance(10 * SCOPE_SETTLE_MS);
    expect(await migration.plan({ live: widened(V), want: V })).toEqual({
      webhooks: widened(V),
      requeueAfterMs: SCOPE_SETTLE_MS,
    });
  });
});
