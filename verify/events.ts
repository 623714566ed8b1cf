// What every model's `EV <tick> <event> <side> ... name=value` lines share, for the trace parsers
// (trace.ts for lease.pml, helper-trace.ts for helper.pml), and the untimed `EV <event> name=value ...`
// lines of admission.pml and scope.pml (admission-trace.ts, scope-trace.ts). Pure.

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

/** An untimed line (`EV <event> name=value ...`) split into its event name and its words. */
export function untimedWords(line: string): { kind: string; parts: string[] } {
  const parts = line.trim().split(/\s+/);
  if (parts[0] !== 'EV') throw new Error(`not an event: ${line}`);
  return { kind: parts[1] ?? '', parts };
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

/** A 0 or 1 of the `name=` word as a boolean. */
export const flag = (v: number | undefined, name: string, line: string): boolean => {
  if (v === 0 || v === 1) return v === 1;
  throw new Error(`${name} is not 0 or 1 in trace line: ${line}`);
};

/** The `name=<0|1>` word of an event. */
export const bit = (parts: readonly string[], name: string, line: string): boolean =>
  flag(field(parts, name, line), name, line);

/** The comma-separated integers of `name=`, exactly `length` of them. */
export function list(parts: readonly string[], name: string, line: string, length: number): number[] {
  const p = parts.find((x) => x.startsWith(`${name}=`));
  const values =
    p === undefined
      ? []
      : p
          .slice(name.length + 1)
          .split(',')
          .map(Number);
  if (values.length !== length || !values.every(Number.isInteger))
    throw new Error(`no ${name}= with ${length} values in trace line: ${line}`);
  return values;
}

/** The value a model's number stands for (its index in `values`). */
export const byIndex = <T>(values: readonly T[], i: number, name: string, line: string): T => {
  const v = values[i];
  if (v === undefined) throw new Error(`bad ${name} in trace line: ${line}`);
  return v;
};
