import { describe, expect, it } from 'vitest';
import { objectKey, splitKey } from '../../../src/kube/keys.ts';
import { obj } from './objects.ts';

describe('keys', () => {
  it('uses namespace/name, or name for cluster-scoped objects, and splits them back', () => {
    expect(objectKey(obj('a', '1'))).toBe('ns/a');
    expect(objectKey({ metadata: { name: 'node-1' } })).toBe('node-1');
    expect(splitKey('ns/a')).toEqual({ namespace: 'ns', name: 'a' });
    expect(splitKey('node-1')).toEqual({ namespace: undefined, name: 'node-1' });
  });
});
