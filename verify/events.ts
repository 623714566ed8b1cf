// What every model's `EV <tick> <event> <side> ... name=value` lines share, for the trace parsers
// (trace.ts for lease.pml, helper-trace.ts for helper.pml). Pure.

/** One of the two clusters, or Pods, of a model. */
export type Side = 0 | 1;

/** The line split into its time, its event name and the rest of its words. */
export function eventWords(line: string): { t: number; kind: string; parts: string[] } {
  const parts = line.trim().split(/\s+/);
  if (parts[0] !== 'EV') throw new Error(`not an event: ${line}`);
  const t = Number(parts[1]);
  if (!Number.isInteger(t)) throw new Error(`bad time in trace line: ${line}`);
  return { t, kind: parts[2] ?? '', parts };
}

export const side = (s: string | undefined, line: string): Side => {
  if (s === '0' || s === '1') return Number(s) as Side;
  throw new Error(`bad cluster or pod in trace line: ${line}`);
};

/** The `name=<integer>` word of an event. */
export const field = (parts: readonly string[], name: string, line: string): number => {
  const p = parts.find((x) => x.startsWith(`${name}=`));
  const v = p === undefined ? Number.NaN : Number(p.slice(name.length + 1));
  if (!Number.isInteger(v)) throw new Error(`no ${name}= in trace line: ${line}`);
  return v;
};

/** A model's call kind: 1 or 2 (each model names its second kind). */
export function callKindOf<K extends string>(s: string | undefined, line: string, second: K): 'acquire' | K {
  if (s === '1') return 'acquire';
  if (s === '2') return second;
  throw new Error(`bad call kind in trace line: ${line}`);
}
