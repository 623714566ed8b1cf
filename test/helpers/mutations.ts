// Generated edits of a JSON document for property tests of what the admission server parses: each mutation sets or
// deletes the value at one of the given paths, creating the containers on the way, and the result is what
// JSON.parse would hand the server (own `__proto__` keys kept, as JSON.parse keeps them).
import fc from 'fast-check';

export type Mutation = { path: string[]; op: 'set' | 'delete'; value: unknown };

/** One mutation at one of `paths`, setting one of `value`'s values or deleting. */
export const mutationOf = (paths: string[][], value: fc.Arbitrary<unknown>): fc.Arbitrary<Mutation> =>
  fc.record({
    path: fc.constantFrom(...paths),
    op: fc.constantFrom('set' as const, 'delete' as const),
    value,
  });

/** A base with the mutations applied, as JSON.parse would hand it over (own `__proto__` keys kept). */
export function mutate(base: Record<string, unknown>, mutations: Mutation[]): unknown {
  let text = JSON.stringify(base);
  for (const m of mutations) {
    const doc = JSON.parse(text) as Record<string, unknown>;
    let at: unknown = doc;
    for (const key of m.path.slice(0, -1)) {
      if (typeof at !== 'object' || at === null) break;
      const holder = at as Record<string, unknown>;
      if (!Object.hasOwn(holder, key) || holder[key] === undefined) {
        Object.defineProperty(holder, key, {
          value: /^\d+$/.test(key) ? [] : {},
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      at = holder[key];
    }
    if (typeof at !== 'object' || at === null) continue;
    const last = m.path[m.path.length - 1]!;
    if (m.op === 'delete') delete (at as Record<string, unknown>)[last];
    else
      Object.defineProperty(at, last, {
        value: m.value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    text = JSON.stringify(doc);
  }
  return JSON.parse(text);
}
