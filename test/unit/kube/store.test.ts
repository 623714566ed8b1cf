import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IndexedStore } from '../../../src/kube/store.ts';
import { type Obj, obj } from './objects.ts';

describe('IndexedStore', () => {
  const byNode = (o: Obj): string[] => (o.spec?.node ? [o.spec.node] : []);

  it('keeps an index exact across add, update (value moves) and delete', () => {
    const store = new IndexedStore<Obj>();
    store.addIndexer('node', byNode);
    store.set('ns/a', obj('a', '1', { spec: { node: 'n1' } }));
    store.set('ns/b', obj('b', '1', { spec: { node: 'n1' } }));
    expect(store.indexKeys('node', 'n1').sort()).toEqual(['ns/a', 'ns/b']);
    store.set('ns/a', obj('a', '2', { spec: { node: 'n2' } }));
    expect(store.indexKeys('node', 'n1')).toEqual(['ns/b']);
    expect(store.byIndex('node', 'n2').map((o) => o.metadata?.resourceVersion)).toEqual(['2']);
    store.delete('ns/b');
    expect(store.indexKeys('node', 'n1')).toEqual([]);
    expect(store.indexValues('node')).toEqual(['n2']);
  });

  it('files existing objects when an indexer is added later, and rejects unknown or duplicate indexes', () => {
    const store = new IndexedStore<Obj>();
    store.set('ns/a', obj('a', '1', { spec: { node: 'n1' } }));
    store.addIndexer('node', byNode);
    expect(store.indexKeys('node', 'n1')).toEqual(['ns/a']);
    expect(() => store.addIndexer('node', byNode)).toThrow(/already exists/);
    expect(() => store.byIndex('nope', 'x')).toThrow(/no indexer/);
  });

  it('survives an indexer that throws: the object is stored, just not indexed', () => {
    const errors: string[] = [];
    const store = new IndexedStore<Obj>((index) => errors.push(index));
    store.addIndexer('bad', () => {
      throw new Error('boom');
    });
    store.set('ns/a', obj('a', '1'));
    expect(store.get('ns/a')).toBeDefined();
    expect(store.byIndex('bad', 'x')).toEqual([]);
    expect(errors).toEqual(['bad']);
  });

  it('model check: indexes always equal a brute-force recomputation', () => {
    const names = ['a', 'b', 'c', 'd'];
    const nodes = ['n1', 'n2', 'n3'];
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('set' as const),
        name: fc.constantFrom(...names),
        nodes: fc.subarray(nodes),
        ns: fc.constantFrom('x', 'y'),
      }),
      fc.record({ kind: fc.constant('delete' as const), name: fc.constantFrom(...names) }),
      fc.record({ kind: fc.constant('replace' as const), keep: fc.subarray(names) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const store = new IndexedStore<Obj>();
        store.addIndexer('nodes', (o) => (o.metadata?.annotations?.nodes ?? '').split(',').filter(Boolean));
        const model = new Map<string, Obj>();
        for (const o of ops) {
          if (o.kind === 'set') {
            const value: Obj = {
              metadata: { name: o.name, namespace: o.ns, annotations: { nodes: o.nodes.join(',') } },
            };
            store.set(o.name, value);
            model.set(o.name, value);
          } else if (o.kind === 'delete') {
            store.delete(o.name);
            model.delete(o.name);
          } else {
            const kept = [...model].filter(([k]) => o.keep.includes(k));
            store.replace(kept);
            model.clear();
            for (const [k, v] of kept) model.set(k, v);
          }
        }
        for (const node of nodes) {
          const expected = [...model]
            .filter(([, v]) => (v.metadata?.annotations?.nodes ?? '').split(',').includes(node))
            .map(([k]) => k)
            .sort();
          expect(store.indexKeys('nodes', node).sort()).toEqual(expected);
        }
        for (const ns of ['x', 'y']) {
          const expected = [...model].filter(([, v]) => v.metadata?.namespace === ns).map(([k]) => k);
          expect(store.indexKeys('namespace', ns).sort()).toEqual(expected.sort());
        }
        expect(store.keys().sort()).toEqual([...model.keys()].sort());
      }),
    );
  });
});
