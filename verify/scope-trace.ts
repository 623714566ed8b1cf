// The events scope.pml prints (`printf("EV <event> k=v ...")`) during a random simulation, parsed for the
// trace replay on the real scope code (docs/verification.md, "The scope replay"): the label's writes and
// every view's steps (versions as the model's window numbers them, with `shift` when it forgets the oldest),
// each decision of the guards, the exit controller and the upgrade with what the model decided, the
// workload writes with whether they were reviewed, the operator's steps and the state after every check.
// Pure.
import { bit, byIndex, field, list, type Side, side, untimedWords } from './events.ts';

/** The label berth.skaphos.io/workload-admission at a version (V_NONE, V_ENABLED, V_LEAVING). */
export type ScopeValue = 'none' | 'enabled' | 'leaving';
const VALUES: readonly ScopeValue[] = ['none', 'enabled', 'leaving'];

/** Who wrote a label version. */
export type LabelWriter = 'user' | 'exit' | 'upgrade';
const WRITERS: readonly LabelWriter[] = ['user', 'exit', 'upgrade'];

/** The exit's patch at the apiserver: 409, denied by namespace-scope, nothing to remove, admitted. */
export type ExitOutcome = 'conflict' | 'denied' | 'unchanged' | 'admitted';
const OUTCOMES: readonly ExitOutcome[] = ['conflict', 'denied', 'unchanged', 'admitted'];

/** What a plan's decision writes: nothing, the guards (selectors still cluster-wide), the narrowing. */
export type PlanWrite = 'nothing' | 'guards' | 'narrow';
const PLAN_WRITES: readonly PlanWrite[] = ['nothing', 'guards', 'narrow'];

/** A workload write the Berth webhooks review when the apiserver calls them. */
export type WorkloadWrite = 'rs-pod' | 'user-pod' | 'replicaset' | 'deployment' | 'ungate' | 'template';
const WRITES: readonly WorkloadWrite[] = [
  'rs-pod',
  'user-pod',
  'replicaset',
  'deployment',
  'ungate',
  'template',
];

export type Phase = 'none' | 'active' | 'stopping';
const PHASES: readonly Phase[] = ['none', 'active', 'stopping'];

export interface ScopeState {
  /** The BerthLease `web` (always with a target) exists. */
  lease: boolean;
  phase: Phase;
  held: boolean;
  lost: boolean;
  deployment: { exists: boolean; stamped: boolean };
  replicaSet: { exists: boolean; stamped: boolean };
  /** Slots 0 and 1 (slot 1 never exists with NP=1). */
  pods: { exists: boolean; stamped: boolean; gated: boolean }[];
  /** The stored version, each apiserver's namespace cache, each replica's informer (window numbers). */
  ver: number;
  nv: [number, number];
  ri: [number, number];
  /** Ticks each replica's informer has shown its value, capped at the settle period. */
  sa: [number, number];
  /** The configuration written (0 cluster-wide, 1 the guards too, 2 narrowed) and each apiserver's. */
  cver: number;
  cv: [number, number];
}

export type ScopeEvent = { line: string } & (
  | {
      kind: 'init';
      value: ScopeValue;
      upgrade: boolean;
      na: number;
      nr: number;
      settle: number;
      tickMs: number;
    }
  | { kind: 'tick' | 'leasewritten' | 'activate' | 'released' | 'other' | 'lost' }
  /** The window forgets its `n` oldest versions: every version number goes down by n. */
  | { kind: 'shift'; n: number }
  | { kind: 'label'; value: ScopeValue; v: number; by: LabelWriter }
  /** Replica r's informer moves from version `from` to `v` (more than one: a relist); sa after it. */
  | { kind: 'replica'; r: Side; v: number; from: number; value: ScopeValue; sa: number }
  | { kind: 'apiserver'; a: Side; v: number; value: ScopeValue }
  /** Apiserver a sees configuration c; configuration c written. */
  | { kind: 'config'; a: Side; c: number }
  | { kind: 'configwrite'; c: number }
  /** A targeted BerthLease CREATE at apiserver a, served by replica r; guarded: berthlease-scope called. */
  | { kind: 'leasecreate'; a: Side; r: Side; guarded: boolean; admitted: boolean }
  /** The exit controller (the leader) decides to remove the label it sees at version v. */
  | { kind: 'exitcheck'; v: number }
  | { kind: 'exitpatch'; a: Side; r: Side; guarded: boolean; outcome: ExitOutcome }
  | { kind: 'exitwrite'; written: boolean }
  /** A user sets the label (enabled or leaving), or removes it at apiserver a. */
  | { kind: 'userset'; value: ScopeValue }
  | { kind: 'userremove'; a: Side; guarded: boolean; admitted: boolean }
  /** A plan's LISTs (holders found, the holder labelled; full: the model's version window had no room). */
  | { kind: 'plan'; holders: boolean; labelled: boolean; full: boolean }
  | { kind: 'planclock'; writes: PlanWrite }
  | { kind: 'stopping'; deleted: boolean; lost: boolean }
  | { kind: 'register'; slot: number }
  | { kind: 'write'; what: WorkloadWrite; a: Side; reviewed: boolean }
  | { kind: 'state'; state: ScopeState }
);

const SIMPLE = new Set(['tick', 'leasewritten', 'activate', 'released', 'other', 'lost']);

function parseState(parts: readonly string[], line: string): ScopeState {
  const n = (name: string): number => field(parts, name, line);
  const b = (name: string): boolean => bit(parts, name, line);
  const pair = (name: string): [number, number] => list(parts, name, line, 2) as [number, number];
  const bits = (name: string): boolean[] => pair(name).map((v) => v === 1);
  const [pex, pstamp, pgate] = [bits('pex'), bits('pstamp'), bits('pgate')];
  return {
    lease: b('lex'),
    phase: byIndex(PHASES, n('lphase'), 'lphase', line),
    held: b('held'),
    lost: b('lost'),
    deployment: { exists: b('dex'), stamped: b('dstamp') },
    replicaSet: { exists: b('rsex'), stamped: b('rsstamp') },
    pods: [0, 1].map((i) => ({ exists: pex[i]!, stamped: pstamp[i]!, gated: pgate[i]! })),
    ver: n('ver'),
    nv: pair('nv'),
    ri: pair('ri'),
    sa: pair('sa'),
    cver: n('cver'),
    cv: pair('cv'),
  };
}

/** One `EV ...` line of scope.pml. */
export function parseScopeEvent(line: string): ScopeEvent {
  const { kind, parts } = untimedWords(line);
  const n = (name: string): number => field(parts, name, line);
  const b = (name: string): boolean => bit(parts, name, line);
  const one = (name: string): Side => side(String(n(name)), line);
  const value = (): ScopeValue => byIndex(VALUES, n('value'), 'value', line);
  if (SIMPLE.has(kind)) return { line, kind } as ScopeEvent;
  switch (kind) {
    case 'init':
      return {
        line,
        kind,
        value: value(),
        upgrade: b('upgrade'),
        na: n('na'),
        nr: n('nr'),
        settle: n('settle'),
        tickMs: n('tickms'),
      };
    case 'shift':
      return { line, kind, n: n('n') };
    case 'label':
      return { line, kind, value: value(), v: n('v'), by: byIndex(WRITERS, n('by'), 'by', line) };
    case 'replica':
      return { line, kind, r: one('r'), v: n('v'), from: n('from'), value: value(), sa: n('sa') };
    case 'apiserver':
      return { line, kind, a: one('a'), v: n('v'), value: value() };
    case 'config':
      return { line, kind, a: one('a'), c: n('c') };
    case 'configwrite':
      return { line, kind, c: n('c') };
    case 'leasecreate':
      return { line, kind, a: one('a'), r: one('r'), guarded: b('guarded'), admitted: b('admitted') };
    case 'exitcheck':
      return { line, kind, v: n('v') };
    case 'exitpatch':
      return {
        line,
        kind,
        a: one('a'),
        r: one('r'),
        guarded: b('guarded'),
        outcome: byIndex(OUTCOMES, n('outcome'), 'outcome', line),
      };
    case 'exitwrite':
      return { line, kind, written: b('written') };
    case 'userset':
      return { line, kind, value: value() };
    case 'userremove':
      return { line, kind, a: one('a'), guarded: b('guarded'), admitted: b('admitted') };
    case 'plan':
      return { line, kind, holders: b('holders'), labelled: b('labelled'), full: b('full') };
    case 'planclock':
      return { line, kind, writes: byIndex(PLAN_WRITES, n('writes'), 'writes', line) };
    case 'stopping':
      return { line, kind, deleted: b('deleted'), lost: b('lost') };
    case 'register':
      return { line, kind, slot: n('slot') };
    case 'write':
      return {
        line,
        kind,
        what: byIndex(WRITES, n('what'), 'what', line),
        a: one('a'),
        reviewed: b('reviewed'),
      };
    case 'state':
      return { line, kind, state: parseState(parts, line) };
    default:
      throw new Error(`unknown event in trace line: ${line}`);
  }
}

export const parseScopeTrace = (lines: readonly string[]): ScopeEvent[] => lines.map(parseScopeEvent);
