// The events lease.pml prints (`printf("EV <tick> <event> ...")`) during a random simulation or a trail
// replay, parsed for the trace replay against the real code (docs/verification.md, "Trace replay"). Pure.

export type Cluster = 0 | 1;
export type CallKind = 'acquire' | 'release';

export type LeaseEvent =
  | { t: number; kind: 'init'; off: [number, number] }
  | {
      t: number;
      kind:
        | 'rec'
        | 'ans'
        | 'err'
        | 'permit'
        | 'ungate'
        | 'podnew'
        | 'podgone'
        | 'up'
        | 'delete'
        | 'part'
        | 'cut'
        | 'handover'
        | 'handoverpass';
      c: Cluster;
    }
  /** `g`: the grace bound (ticks) of a running Pod's deletion, GRACE(dl) of the model. */
  | { t: number; kind: 'poddel'; c: Cluster; g?: number }
  | { t: number; kind: 'send'; c: Cluster; call: CallKind; tok: number }
  | { t: number; kind: 'srv'; c: Cluster; call: CallKind; id: number }
  | { t: number; kind: 'held'; c: Cluster; tok: number; dl: number }
  | { t: number; kind: 'done'; c: Cluster; rq: number }
  | { t: number; kind: 'done'; c: Cluster; end: 'gone' | 'handedover' }
  | { t: number; kind: 'crash'; c: Cluster; down: number };

const SIMPLE = new Set([
  'rec',
  'ans',
  'err',
  'permit',
  'ungate',
  'podnew',
  'podgone',
  'up',
  'delete',
  'part',
  'cut',
  'handover',
  'handoverpass',
]);

const cluster = (s: string | undefined, line: string): Cluster => {
  if (s === '0' || s === '1') return Number(s) as Cluster;
  throw new Error(`bad cluster in trace line: ${line}`);
};
const callKind = (s: string | undefined, line: string): CallKind => {
  if (s === '1') return 'acquire';
  if (s === '2') return 'release';
  throw new Error(`bad call kind in trace line: ${line}`);
};
/** The integer of `name=` among the words of a trace line (shared with admission-trace.ts). */
export const field = (parts: readonly string[], name: string, line: string): number => {
  const p = parts.find((x) => x.startsWith(`${name}=`));
  const v = p === undefined ? Number.NaN : Number(p.slice(name.length + 1));
  if (!Number.isInteger(v)) throw new Error(`no ${name}= in trace line: ${line}`);
  return v;
};

/** One `EV ...` line. */
export function parseEvent(line: string): LeaseEvent {
  const parts = line.trim().split(/\s+/);
  if (parts[0] !== 'EV') throw new Error(`not an event: ${line}`);
  const t = Number(parts[1]);
  const kind = parts[2] ?? '';
  if (!Number.isInteger(t)) throw new Error(`bad time in trace line: ${line}`);
  if (kind === 'init') return { t, kind, off: [Number(parts[3]), Number(parts[4])] };
  const c = cluster(parts[3], line);
  if (SIMPLE.has(kind)) return { t, kind, c } as LeaseEvent;
  switch (kind) {
    case 'send':
      return { t, kind, c, call: callKind(parts[4], line), tok: field(parts, 'tok', line) };
    case 'srv':
      return { t, kind, c, call: callKind(parts[4], line), id: field(parts, 'id', line) };
    case 'held':
      return { t, kind, c, tok: field(parts, 'tok', line), dl: field(parts, 'dl', line) };
    case 'poddel':
      return parts.length > 4 ? { t, kind, c, g: field(parts, 'g', line) } : { t, kind, c };
    case 'done':
      if (parts[4] === 'gone' || parts[4] === 'handedover') return { t, kind, c, end: parts[4] };
      return { t, kind, c, rq: field(parts, 'rq', line) };
    case 'crash':
      return { t, kind, c, down: field(parts, 'down', line) };
    default:
      throw new Error(`unknown event in trace line: ${line}`);
  }
}

export const parseTrace = (lines: readonly string[]): LeaseEvent[] => lines.map(parseEvent);
