import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { SCOPE_ENABLED, SCOPE_LABEL, SCOPE_LEAVING } from '../../../src/berth/api.ts';
import { nextScopeEntry, type ScopeEntry, ScopeObservations } from '../../../src/berth/namespace-scope.ts';

const ns = (value: string | undefined, resourceVersion: string): KubernetesObject => ({
  metadata: { name: 'apps', resourceVersion, labels: value === undefined ? {} : { [SCOPE_LABEL]: value } },
});
const leaving: ScopeEntry = { value: SCOPE_LEAVING, since: 1_000, resourceVersion: '5' };

describe('nextScopeEntry', () => {
  it('keeps since across a watched update that keeps the value', () => {
    expect(nextScopeEntry(leaving, ns(SCOPE_LEAVING, '6'), false, 9_000)).toEqual({
      value: SCOPE_LEAVING,
      since: 1_000,
      resourceVersion: '6',
    });
  });

  it('takes since anew when the value changes', () => {
    expect(nextScopeEntry(leaving, ns(SCOPE_ENABLED, '6'), false, 9_000)?.since).toBe(9_000);
  });

  it('takes since anew on a relist, which may have skipped a change and back', () => {
    // leaving -> enabled -> leaving while the watch was down: the relist shows leaving at a new version.
    expect(nextScopeEntry(leaving, ns(SCOPE_LEAVING, '8'), true, 9_000)?.since).toBe(9_000);
  });

  it('records nothing for a namespace out of scope', () => {
    expect(nextScopeEntry(leaving, ns(undefined, '6'), false, 9_000)).toBeUndefined();
    expect(nextScopeEntry(undefined, ns('yes', '6'), false, 9_000)).toBeUndefined();
  });
});

describe('ScopeObservations (what NamespaceScope records from its informer)', () => {
  const start = () => {
    let now = 1_000;
    let synced = false;
    const seen = new ScopeObservations(
      () => now,
      () => synced,
    );
    return {
      seen,
      at: (ms: number) => {
        now = ms;
      },
      sync: () => {
        synced = true;
      },
    };
  };

  it('knows nothing before the first list, then records each event with nextScopeEntry', () => {
    const { seen, at, sync } = start();
    seen.handlers.onAdd?.(ns(SCOPE_LEAVING, '5'));
    expect(seen.entry('apps')).toBeUndefined();
    sync();
    expect(seen.entry('apps')).toEqual(leaving);
    expect(seen.entry('other')).toBe('out');
    at(9_000);
    seen.handlers.onUpdate?.(ns(SCOPE_LEAVING, '5'), ns(SCOPE_LEAVING, '6'), false);
    expect(seen.entry('apps')).toEqual({ ...leaving, resourceVersion: '6' });
    seen.handlers.onUpdate?.(ns(SCOPE_LEAVING, '6'), ns(SCOPE_LEAVING, '8'), true);
    expect(seen.entry('apps')).toEqual({ ...leaving, since: 9_000, resourceVersion: '8' });
  });

  it('forgets a namespace deleted from the label-selected informer, or updated out of scope', () => {
    const { seen, sync } = start();
    sync();
    seen.handlers.onAdd?.(ns(SCOPE_ENABLED, '5'));
    seen.handlers.onDelete?.(ns(SCOPE_ENABLED, '6'), false);
    expect(seen.entry('apps')).toBe('out');
    seen.handlers.onAdd?.(ns(SCOPE_ENABLED, '7'));
    seen.handlers.onUpdate?.(ns(SCOPE_ENABLED, '7'), ns(undefined, '8'), false);
    expect(seen.entry('apps')).toBe('out');
  });
});
