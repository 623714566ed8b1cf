// The events admission.pml prints (`printf("EV <event> k=v ...")`) during a random simulation, parsed for
// the trace replay on the real webhook code (docs/verification.md, "Trace replay"): the state after every
// action (`state`), each write through the webhooks with what the model decided, and the environment's
// actions. Pure.
import { byIndex, field, flag, list, untimedWords } from './events.ts';

/** A BerthLease or Deployment incarnation of the model (0 in a reference: none). */
export type Incarnation = 1 | 2;
export const INCARNATIONS: readonly Incarnation[] = [1, 2];

/** Who writes (the model's A_USER, A_RS, A_OPERATOR, A_REPLICA). */
export type Actor = 'user' | 'replicaset' | 'operator' | 'replica';
const ACTORS: readonly Actor[] = ['user', 'replicaset', 'operator', 'replica'];

export type Phase = 'none' | 'active' | 'stopping';
const PHASES: readonly Phase[] = ['none', 'active', 'stopping'];

export interface LeaseState {
  exists: boolean;
  deleting: boolean;
  /** status.workload.targetUID: a Deployment incarnation, 0 none. */
  record: number;
  phase: Phase;
  /** The registered Pod slots, a bit each. */
  pods: number;
  /** This cluster holds the central lease. */
  held: boolean;
  /** The activation's deadline passed. */
  lost: boolean;
}

export interface DeploymentState {
  exists: boolean;
  /** The lease it is stamped for, 0 none. */
  stamp: number;
  /** Its template carries the scheduling gate. */
  gate: boolean;
  replicas: number;
  /** Ghost: the lease that targeted `web` when it was created (9: its CREATE was refused). */
  should: number;
}

export interface ReplicaSetState {
  exists: boolean;
  /** Its controller, a Deployment incarnation; 0 none. */
  owner: number;
  stamp: number;
  templateStamp: number;
  gate: boolean;
  replicas: number;
}

export interface PodState {
  exists: boolean;
  /** Controlled by the ReplicaSet. */
  owned: boolean;
  stamp: number;
  gate: boolean;
  deleting: boolean;
}

/** The webhooks' lease caches: which incarnations each still (or already) shows. */
export type View = 'mutating' | 'validating';

export interface AdmissionState {
  leases: Record<Incarnation, LeaseState>;
  /** The other cluster holds the central lease. */
  other: boolean;
  deployments: Record<Incarnation, DeploymentState>;
  replicaSet: ReplicaSetState;
  /** Slots 0 and 1. */
  pods: PodState[];
  /** The next free slot. */
  next: number;
  cache: Record<View, Record<Incarnation, boolean>>;
}

export type AdmissionEvent = { line: string } & (
  | { kind: 'state'; state: AdmissionState }
  /** A Pod CREATE in `slot` as its writer sends it, and the verdicts: mutating (with the stamp and gate it leaves), validating. */
  | {
      kind: 'podcreate';
      by: Actor;
      slot: number;
      own: boolean;
      stamp: number;
      gate: boolean;
      mutating: boolean;
      mstamp: number;
      mgate: boolean;
      validating: boolean;
    }
  /** The scheduling gate taken off the Pod in `slot`. */
  | { kind: 'podungate'; by: Actor; slot: number; validating: boolean }
  /** The ReplicaSet controller adopts the Pod in `slot` (a controller reference added). */
  | { kind: 'podadopt'; slot: number; validating: boolean }
  /** Deployment `d` adopts the orphaned ReplicaSet; the garbage collector orphans it from `d`. */
  | { kind: 'rsadopt' | 'rsorphan'; d: number; validating: boolean }
  /** A user's scale-up of Deployment `d` (unstamped: its template's gate off too). */
  | { kind: 'deployupdate'; d: number; validating: boolean }
  /** A user's CREATE of Deployment `d`, and the verdicts (mstamp: the lease the mutating webhook stamps). */
  | { kind: 'deploycreate'; d: number; mutating: boolean; mstamp: number; validating: boolean }
  /** A registration of the Pod in `slot` in lease `l`'s status; ok=false: the write's 409. */
  | { kind: 'register'; by: Actor; slot: number; l: number; ok: boolean }
  /** A drain pass of lease `l`; `left` Pods were still there (0: released). */
  | { kind: 'drain'; l: number; left: number }
  | {
      kind: 'activate' | 'stopping' | 'finalized' | 'lost' | 'leasecreate' | 'leasedelete' | 'replicaread';
      l: number;
    }
  | { kind: 'deploydelete'; d: number }
  | { kind: 'other'; holds: boolean }
  | { kind: 'rsscale'; rep: number }
  | { kind: 'rsdelete' | 'podgone'; slot: number }
  /** A cache catching up with lease `l` (view 'both', l 0: both at once, the model without CACHE). */
  | { kind: 'cache'; view: View | 'both'; l: number }
);

const L_EVENTS = new Set([
  'activate',
  'stopping',
  'finalized',
  'lost',
  'leasecreate',
  'leasedelete',
  'replicaread',
]);

function parseState(parts: readonly string[], line: string): AdmissionState {
  const pair = (name: string): number[] => list(parts, name, line, 2);
  const bits = (name: string): boolean[] => pair(name).map((v) => flag(v, name, line));
  const one = (name: string): number => field(parts, name, line);
  const [lex, ldel, lrec, lphase, lpods, held, lost] = [
    bits('lex'),
    bits('ldel'),
    pair('lrec'),
    pair('lphase'),
    pair('lpods'),
    bits('held'),
    bits('lost'),
  ];
  const [dex, dstamp, dgate, drep, dshould] = [
    bits('dex'),
    pair('dstamp'),
    bits('dgate'),
    pair('drep'),
    pair('dshould'),
  ];
  const [pex, pown, pstamp, pgate, pdel] = [
    bits('pex'),
    bits('pown'),
    pair('pstamp'),
    bits('pgate'),
    bits('pdel'),
  ];
  const cache = list(parts, 'cache', line, 4).map((v) => flag(v, 'cache', line));
  const lease = (i: number): LeaseState => ({
    exists: lex[i]!,
    deleting: ldel[i]!,
    record: lrec[i]!,
    phase: byIndex(PHASES, lphase[i]!, 'lphase', line),
    pods: lpods[i]!,
    held: held[i]!,
    lost: lost[i]!,
  });
  const deployment = (i: number): DeploymentState => ({
    exists: dex[i]!,
    stamp: dstamp[i]!,
    gate: dgate[i]!,
    replicas: drep[i]!,
    should: dshould[i]!,
  });
  return {
    leases: { 1: lease(0), 2: lease(1) },
    other: flag(one('other'), 'other', line),
    deployments: { 1: deployment(0), 2: deployment(1) },
    replicaSet: {
      exists: flag(one('rsex'), 'rsex', line),
      owner: one('rsown'),
      stamp: one('rsstamp'),
      templateStamp: one('rststamp'),
      gate: flag(one('rsgate'), 'rsgate', line),
      replicas: one('rsrep'),
    },
    pods: [0, 1].map((i) => ({
      exists: pex[i]!,
      owned: pown[i]!,
      stamp: pstamp[i]!,
      gate: pgate[i]!,
      deleting: pdel[i]!,
    })),
    next: one('pnext'),
    cache: {
      mutating: { 1: cache[0]!, 2: cache[1]! },
      validating: { 1: cache[2]!, 2: cache[3]! },
    },
  };
}

/** One `EV ...` line of admission.pml. */
export function parseAdmissionEvent(line: string): AdmissionEvent {
  const { kind, parts } = untimedWords(line);
  const n = (name: string): number => field(parts, name, line);
  const b = (name: string): boolean => flag(n(name), name, line);
  const by = (): Actor => byIndex(ACTORS, n('by'), 'by', line);
  if (L_EVENTS.has(kind)) return { line, kind, l: n('l') } as AdmissionEvent;
  switch (kind) {
    case 'state':
      return { line, kind, state: parseState(parts, line) };
    case 'podcreate':
      return {
        line,
        kind,
        by: by(),
        slot: n('slot'),
        own: b('own'),
        stamp: n('stamp'),
        gate: b('gate'),
        mutating: b('mutating'),
        mstamp: n('mstamp'),
        mgate: b('mgate'),
        validating: b('validating'),
      };
    case 'podungate':
      return { line, kind, by: by(), slot: n('slot'), validating: b('validating') };
    case 'podadopt':
      return { line, kind, slot: n('slot'), validating: b('validating') };
    case 'rsadopt':
    case 'rsorphan':
      return { line, kind, d: n('d'), validating: b('validating') };
    case 'deployupdate':
      return { line, kind, d: n('d'), validating: b('validating') };
    case 'deploycreate':
      return {
        line,
        kind,
        d: n('d'),
        mutating: b('mutating'),
        mstamp: n('mstamp'),
        validating: b('validating'),
      };
    case 'register':
      return { line, kind, by: by(), slot: n('slot'), l: n('l'), ok: b('ok') };
    case 'drain':
      return { line, kind, l: n('l'), left: n('left') };
    case 'deploydelete':
      return { line, kind, d: n('d') };
    case 'other':
      return { line, kind, holds: b('holds') };
    case 'rsscale':
      return { line, kind, rep: n('rep') };
    case 'rsdelete':
    case 'podgone':
      return { line, kind, slot: n('slot') };
    case 'cache': {
      const view = byIndex(['mutating', 'validating', 'both'] as const, n('view'), 'view', line);
      return { line, kind, view, l: n('l') };
    }
    default:
      throw new Error(`unknown event in trace line: ${line}`);
  }
}

export const parseAdmissionTrace = (lines: readonly string[]): AdmissionEvent[] =>
  lines.map(parseAdmissionEvent);
