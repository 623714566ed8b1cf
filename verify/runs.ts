// Every check of the models (docs/verification.md lists the same, with what each shows): the properties
// that must hold at the bounds (expect `pass`), the known holes re-introduced as switches, the findings
// about today's timing and the proposed stop lead (expect `counterexample` or `pass`). The CI bounds run
// inside `npm test` (test/unit/verify/models.test.ts); `npm run verify` runs the same list at the deeper
// bound (PROFILE 2). Pure data.
import type { RunSpec } from './spin.ts';

export type RunKind = 'property' | 'hole' | 'finding' | 'proposal' | 'teeth';

export interface ModelRun extends RunSpec {
  kind: RunKind;
  /** Extra -D flags at the deeper bound (`npm run verify`) instead of `defines`. */
  deep?: readonly string[];
  /** Where the trace replay takes its traces from: a run whose counterexample is replayed on the code. */
  replay?: boolean;
}

const lease = (
  name: string,
  kind: RunKind,
  expect: RunSpec['expect'],
  defines: readonly string[],
  why: string,
  extra: Partial<ModelRun> = {},
): ModelRun => ({ name, kind, model: 'lease.pml', mode: 'safety', expect, defines, why, ...extra });

/** The faults of the lease model's property runs, per run (a fault budget of 3 each). */
const NET_FAULTS = ['-DF_LOSS', '-DF_DUP', '-DF_STALL', '-DF_DELAY', '-DFAULTS=3', '-DDELETES=1'];
const PARTITION = ['-DF_PART', '-DF_DELAY', '-DOFFSET=1', '-DFAULTS=3'];

export const RUNS: readonly ModelRun[] = [
  // ---- lease.pml: properties at the bounds ----
  lease(
    'lease: message faults and deletion',
    'property',
    'pass',
    NET_FAULTS,
    'at-most-once, registration and tokens with lost, delayed, stalled and duplicated messages and a BerthLease deletion (Pods stop at once)',
  ),
  lease(
    'lease: partitions and clock offsets',
    'property',
    'pass',
    PARTITION,
    'the same with partitions from the central server longer than the TTL and clocks 1 tick off the server',
    { deep: ['-DF_PART', '-DF_DELAY', '-DOFFSET=1', '-DFAULTS=2'] },
  ),
  lease(
    'lease: leader crash within the failover bound',
    'property',
    'pass',
    ['-DF_CRASH', '-DFAULTS=1', '-DOFFSET=1'],
    'a crashed leader is replaced within leaderFailoverBoundMs while the central server is reachable',
  ),
  lease(
    'lease: graceful hand-over',
    'property',
    'pass',
    ['-DF_HANDOVER', '-DF_DELAY', '-DF_LOSS', '-DDELETES=1', '-DFAULTS=2'],
    'a stopping leader without successor stops, drains and releases (docs/decisions/0002-hand-over-on-stop.md)',
  ),
  {
    name: 'lease: liveness',
    kind: 'property',
    model: 'lease.pml',
    mode: 'liveness',
    expect: 'pass',
    defines: ['-DF_CUT', '-DF_DELAY', '-DF_DUP', '-DF_LOSS', '-DFAULTS=3'],
    why: 'under weak fairness, once B is cut off from the central server for good, A eventually runs the workload',
  },
  // ---- the known holes, as switches ----
  lease(
    'hole 3: deadline from the answer, not the request',
    'hole',
    'counterexample',
    ['-DHOLE_DEADLINE_FROM_RECEIPT', '-DF_PART', '-DF_DELAY', '-DOFFSET=2', '-DFAULTS=3'],
    'measuring the TTL from the answer lets a cluster whose clock is behind run past the central expiry',
    { replay: true },
  ),
  lease(
    'hole 4: release before the drain',
    'hole',
    'counterexample',
    ['-DHOLE_RELEASE_BEFORE_DRAIN', '-DDELETES=1'],
    'releasing once the Pods are deleted, not gone, lets the other cluster start while they still run',
    { replay: true },
  ),
  // ---- findings: today's timing assumptions, each broken on its own ----
  lease(
    'finding: Pods take time to stop',
    'finding',
    'counterexample',
    ['-DT_TERM=1', '-DF_PART'],
    'the stop starts at the deadline; a Pod that takes a tick to stop still runs when the other cluster starts',
    { replay: true },
  ),
  lease(
    'finding: the reconcile starts late',
    'finding',
    'counterexample',
    ['-DLAG=1', '-DF_PART'],
    'a reconcile due at the deadline that starts a tick late stops the Pods after the central expiry',
  ),
  lease(
    'finding: clock rate drift',
    'finding',
    'counterexample',
    ['-DDRIFT=1', '-DF_PART'],
    'a clock that measures the TTL a tick long stops the Pods after the central expiry',
  ),
  lease(
    'finding: a crash during a central outage',
    'finding',
    'counterexample',
    ['-DF_CRASH', '-DF_PART', '-DFAULTS=2'],
    'a leader that crashes shortly before an unrenewable deadline leaves the Pods running until its successor',
    { replay: true },
  ),
  lease(
    'finding: a leader crash with the default timings',
    'finding',
    'counterexample',
    ['-DF_CRASH', '-DF_DELAY', '-DDELAY=4', '-DFAULTS=3'],
    'TTL 30 s, heartbeat 10 s, the default leader election (19.4 s): a crash after a renewal answered in 1 s or more leaves the Pods running past the central expiry, which failoverMarginProblem accepts',
    { replay: true, profile: 3 },
  ),
  // ---- the proposed stop lead closes each finding ----
  lease(
    'proposal: stop lead covers Pod termination',
    'proposal',
    'pass',
    ['-DLEAD=1', '-DT_TERM=1', '-DF_PART', '-DF_DELAY', '-DOFFSET=1', '-DFAULTS=3'],
    'with the activation ending T_TERM before the deadline, Pods that take T_TERM to stop are gone in time',
  ),
  lease(
    'proposal: stop lead covers a late reconcile',
    'proposal',
    'pass',
    ['-DLEAD=1', '-DLAG=1', '-DF_PART', '-DF_DELAY', '-DFAULTS=3'],
    'a lead of LAG covers a reconcile that starts late',
  ),
  lease(
    'proposal: stop lead covers clock drift',
    'proposal',
    'pass',
    ['-DLEAD=1', '-DDRIFT=1', '-DF_PART', '-DF_DELAY', '-DFAULTS=3'],
    'a lead of DRIFT covers a clock that measures the TTL long',
  ),
  lease(
    'proposal: stop lead covers a crash during an outage',
    'proposal',
    'pass',
    ['-DLEAD=FAILOVER', '-DF_CRASH', '-DF_PART', '-DF_DELAY', '-DFAULTS=3'],
    'a lead of the failover bound covers a leader crash at any time',
  ),
  // ---- teeth of the liveness property ----
  {
    name: 'teeth: liveness fails without failover',
    kind: 'teeth',
    model: 'lease.pml',
    mode: 'liveness',
    expect: 'counterexample',
    defines: ['-DBREAK_STANDBY', '-DF_CUT', '-DFAULTS=1'],
    why: 'a standby that stops polling never takes over: the liveness check can fail',
  },
];
