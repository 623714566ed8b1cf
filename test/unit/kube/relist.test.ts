import { describe, expect, it } from 'vitest';
import { objectKey } from '../../../src/kube/keys.ts';
import { diffRelist } from '../../../src/kube/relist.ts';
import { obj } from './objects.ts';

describe('diffRelist', () => {
  it('adds new keys, updates keys whose resourceVersion changed, deletes vanished ones', () => {
    const cached = new Map([
      ['ns/same', obj('same', '1')],
      ['ns/changed', obj('changed', '1')],
      ['ns/gone', obj('gone', '1')],
    ]);
    const listed = new Map([
      ['ns/same', obj('same', '1')],
      ['ns/changed', obj('changed', '5')],
      ['ns/new', obj('new', '6')],
    ]);
    const diff = diffRelist(cached, listed);
    expect(diff.added.map(objectKey)).toEqual(['ns/new']);
    expect(
      diff.updated.map(([o, n]) => `${o.metadata?.resourceVersion}->${n.metadata?.resourceVersion}`),
    ).toEqual(['1->5']);
    expect(diff.deleted.map(objectKey)).toEqual(['ns/gone']);
  });
});
