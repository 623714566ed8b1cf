// The events helper.pml prints (`printf("EV <tick> <event> <pod> ...")`) during a random simulation or a
// trail replay, parsed for the helper's trace replay on the code (docs/verification.md, "Trace replay on
// the real code"). Pure.
import { callKindOf, eventWords, field, type Side, side } from './events.ts';

export type Pod = Side;
/** The model's call kinds: CALL_ACQ and CALL_REN. */
export type HelperCall = 'acquire' | 'renew';

export type HelperEvent =
  | { t: number; kind: 'init' }
  | {
      t: number;
      kind: 'lost' | 'anslost' | 'err' | 'fence' | 'lose' | 'gone' | 'restart' | 'reinit' | 'part' | 'start';
      p: Pod;
    }
  | { t: number; kind: 'send'; p: Pod; call: HelperCall; tok: number; bound: number }
  | { t: number; kind: 'srv'; p: Pod; call: HelperCall; tok: number; cur: boolean }
  | { t: number; kind: 'ans'; p: Pod; call: HelperCall; acq: boolean; tok: number }
  | { t: number; kind: 'acquired'; p: Pod; tok: number }
  | { t: number; kind: 'confirm'; p: Pod; tok: number; fence: number }
  | { t: number; kind: 'kill' | 'restartall'; p: Pod; kt: number };

const SIMPLE = new Set([
  'lost',
  'anslost',
  'err',
  'fence',
  'lose',
  'gone',
  'restart',
  'reinit',
  'part',
  'start',
]);

const pod = side;
const call = (s: string | undefined, line: string): HelperCall => callKindOf(s, line, 'renew');

/** One `EV ...` line of helper.pml. */
export function parseHelperEvent(line: string): HelperEvent {
  const { t, kind, parts } = eventWords(line);
  if (kind === 'init') return { t, kind };
  const p = pod(parts[3], line);
  if (SIMPLE.has(kind)) return { t, kind, p } as HelperEvent;
  switch (kind) {
    case 'send':
      return {
        t,
        kind,
        p,
        call: call(parts[4], line),
        tok: field(parts, 'tok', line),
        bound: field(parts, 'bound', line),
      };
    case 'srv':
      return {
        t,
        kind,
        p,
        call: call(parts[4], line),
        tok: field(parts, 'tok', line),
        cur: field(parts, 'cur', line) === 1,
      };
    case 'ans':
      return {
        t,
        kind,
        p,
        call: call(parts[4], line),
        acq: field(parts, 'acq', line) === 1,
        tok: field(parts, 'tok', line),
      };
    case 'acquired':
      return { t, kind, p, tok: field(parts, 'tok', line) };
    case 'confirm':
      return { t, kind, p, tok: field(parts, 'tok', line), fence: field(parts, 'fence', line) };
    case 'kill':
    case 'restartall':
      return { t, kind, p, kt: field(parts, 'kt', line) };
    default:
      throw new Error(`unknown event in trace line: ${line}`);
  }
}

export const parseHelperTrace = (lines: readonly string[]): HelperEvent[] => lines.map(parseHelperEvent);
