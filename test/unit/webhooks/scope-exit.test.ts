// The exit controller's decision (webhooks/scope-exit.ts decideScopeExit): nothing unless this replica has
// seen the namespace leaving; a requeue while it settles; the live LISTs only once settled; the removal
// guarded by the resourceVersion this replica saw. The controller itself (its Events, the PATCH and its
// 409) runs on the real control plane: test/integration/managed/scope.test.ts.
import { describe, expect, it } from 'vitest';
import { SCOPE_ENABLED, SCOPE_LABEL, SCOPE_LEAVING, SCOPE_SETTLE_MS } from '../../../src/berth/api.ts';
import { decideScopeExit, scopeRemovalPatch } from '../../../webhooks/scope-exit.ts';

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);
const leaving = (agoMs: number) => ({ value: SCOPE_LEAVING, since: NOW - agoMs, resourceVersion: '42' });

describe('decideScopeExit', () => {
  it('does nothing for a namespace this replica does not see leaving, without reading', async () => {
    const holder = async (): Promise<string | undefined> => {
      throw new Error('no LIST expected');
    };
    for (const entry of [undefined, 'out' as const, { ...leaving(60_000), value: SCOPE_ENABLED }])
      expect(await decideScopeExit(entry, NOW, holder)).toEqual({ kind: 'none' });
  });

  it('looks again once the settle period has passed, without reading before', async () => {
    const holder = async (): Promise<string | undefined> => {
      throw new Error('no LIST expected');
    };
    expect(await decideScopeExit(leaving(1_000), NOW, holder)).toEqual({
      kind: 'settling',
      requeueAfterMs: SCOPE_SETTLE_MS - 1_000,
    });
  });

  it('waits while something managed is left, and removes the label at the version it saw once nothing is', async () => {
    expect(await decideScopeExit(leaving(SCOPE_SETTLE_MS), NOW, async () => 'BerthLease web')).toEqual({
      kind: 'waiting',
      holder: 'BerthLease web',
    });
    expect(await decideScopeExit(leaving(SCOPE_SETTLE_MS), NOW, async () => undefined)).toEqual({
      kind: 'remove',
      resourceVersion: '42',
    });
    expect(scopeRemovalPatch('42')).toEqual({
      metadata: { resourceVersion: '42', labels: { [SCOPE_LABEL]: null } },
    });
  });
});
