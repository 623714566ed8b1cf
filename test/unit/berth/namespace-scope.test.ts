import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { SCOPE_ENABLED, SCOPE_LABEL, SCOPE_LEAVING } from '../../../src/berth/api.ts';
import { nextScopeEntry, type ScopeEntry } from '../../../src/berth/namespace-scope.ts';

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
