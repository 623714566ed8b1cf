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

const adm = (
  name: string,
  kind: RunKind,
  expect: RunSpec['expect'],
  defines: readonly string[],
  why: string,
  extra: Partial<ModelRun> = {},
): ModelRun => ({ name, kind, model: 'admission.pml', mode: 'safety', expect, defines, why, ...extra });

const scope = (
  name: string,
  kind: RunKind,
  expect: RunSpec['expect'],
  defines: readonly string[],
  why: string,
  extra: Partial<ModelRun> = {},
): ModelRun => ({ name, kind, model: 'scope.pml', mode: 'safety', expect, defines, why, ...extra });

/** The upgrade with the proposed fixes, at a bound that keeps its timers' product small. */
const UPGRADE_FIXED = ['-DUPGRADE', '-DFIX_RELIST', '-DFIX_HOLDERS_SETTLED', '-DLOSSES=0', '-DNP=1'];

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
  // ---- admission.pml: properties at the bounds ----
  adm(
    'admission: owner chains, orphans and a replaced lease',
    'property',
    'pass',
    ['-DORPHANS', '-DUSER=5'],
    'a Deployment deleted with orphan propagation, its lease deleted and replaced, Pods adopted or created under the stamped ReplicaSet: every running Pod of a chain is registered and held',
    { deep: ['-DORPHANS', '-DUSER=7'] },
  ),
  adm(
    'admission: a replica with a stale copy of the lease',
    'property',
    'pass',
    ['-DSTALE', '-DUSER=3'],
    'a second operator replica registers and ungates from a stale Active copy: the guarded status write and the live gate check stop it',
    { deep: ['-DSTALE', '-DORPHANS', '-DUSER=5'] },
  ),
  adm(
    'admission: the lease cache for owned objects',
    'property',
    'pass',
    ['-DCACHE', '-DORPHANS', '-DUSER=5'],
    'issue 33: which lease targets the root of an owned object answered from lagging caches (one per webhook): only denials and gated admissions change',
    { deep: ['-DCACHE', '-DORPHANS', '-DSTALE', '-DUSER=5'] },
  ),
  adm(
    'hole 1: stale stamped ReplicaSet adoption',
    'hole',
    'counterexample',
    ['-DORPHANS', '-DHOLE_SKIP_WALK', '-DUSER=5'],
    'skipping the owner walk in a namespace without BerthLease admits an ungated Pod into an orphaned stamped ReplicaSet, which a new lease adopts',
  ),
  adm(
    'hole 5: a stale status written back',
    'hole',
    'counterexample',
    ['-DSTALE', '-DHOLE_STALE_REGISTER'],
    'a registration written without the resourceVersion guard puts back a stale status (Active, or without the Pods registered since)',
  ),
  adm(
    'hole 5: the gate check on a stale copy',
    'hole',
    'counterexample',
    ['-DSTALE', '-DHOLE_STALE_UNGATE'],
    'a gate removal judged on a cached Active copy lifts a gate after Stopping was committed',
  ),
  adm(
    'cache for root objects too (unsafe alternative)',
    'hole',
    'counterexample',
    ['-DHOLE_CACHE_ROOT', '-DCACHE', '-DORPHANS', '-DUSER=4'],
    'issue 33: a Deployment CREATE judged on a cache that misses a new lease is admitted unmanaged, ungated, without admission record',
  ),
  // ---- scope.pml: the opt-in admission scope of issue 33 as implemented (v2) ----
  scope(
    'scope: entry and the two-step exit, two apiservers',
    'property',
    'pass',
    ['-DHA'],
    'two kube-apiservers whose namespace caches and configuration views lag independently, just under the settle period: nothing of a managed chain is admitted unreviewed',
  ),
  scope(
    'scope: two operator replicas whose informers see every event',
    'property',
    'pass',
    ['-DHA_OP', '-DNOSKIP'],
    'the guards served by either replica, each with its own lagging informer and `since`, as long as an informer never skips a version',
    { deep: ['-DHA', '-DHA_OP', '-DNOSKIP'] },
  ),
  scope(
    'finding: a relist keeps since across a skipped change',
    'finding',
    'counterexample',
    ['-DHA_OP'],
    "the leader's informer jumps from leaving to leaving over enabled (a relist): its since is kept, the exit removes the label while the other replica, still showing enabled settled, admits a targeted BerthLease; the target is admitted unreviewed",
  ),
  scope(
    'proposal: since restarts when the informer relists',
    'proposal',
    'pass',
    ['-DHA_OP', '-DFIX_RELIST'],
    "a replica's since taken anew when its informer may have skipped a version: the scope holds with relists",
    { deep: ['-DHA', '-DHA_OP', '-DFIX_RELIST'] },
  ),
  scope(
    'finding: the upgrade narrows on a label an apiserver does not show yet',
    'finding',
    'counterexample',
    ['-DUPGRADE'],
    "a holder's label removed through an apiserver without the guards and set again by a user: the plan finds it labelled and narrows, and the apiserver, still showing it unlabelled, admits a Pod of the chain unreviewed",
  ),
  scope(
    "proposal: the upgrade waits for the holders' labels",
    'proposal',
    'pass',
    [...UPGRADE_FIXED, '-DUSER=3'],
    "narrowing only a further settle period after the guards' one, once every holder's label has been shown in scope by the leader's informer for the settle period (since restarting on a relist)",
    { deep: [...UPGRADE_FIXED, '-DUSER=2'] },
  ),
  scope(
    'scope hole: no settle on entry',
    'hole',
    'counterexample',
    ['-DHOLE_ENTRY_UNSETTLED'],
    'a targeted BerthLease admitted as soon as the replica sees the label: an apiserver that does not see it yet admits the target unreviewed (v1 trace 3)',
  ),
  scope(
    'scope hole: a one-step exit',
    'hole',
    'counterexample',
    ['-DHOLE_ONE_STEP'],
    'a removal from enabled guarded by the live LISTs alone: a BerthLease admitted before the LISTs is written after them (v1 trace 2)',
  ),
  scope(
    "scope hole: the exit's LIST, then an unguarded write",
    'hole',
    'counterexample',
    ['-DHOLE_EXIT_UNGUARDED'],
    "the exit's write neither carries the resourceVersion it saw nor is reviewed again: the namespace set back to enabled meanwhile loses its label under a new lease",
  ),
  scope(
    'scope hole: narrowing before the guards and labels settle',
    'hole',
    'counterexample',
    [...UPGRADE_FIXED, '-DUSER=3', '-DHOLE_EARLY_NARROW'],
    "the upgrade narrows once the guards are written: an apiserver that does not see them admits a holder's label removal (v1 trace 4)",
  ),
  scope(
    'teeth: views that lag the settle period',
    'teeth',
    'counterexample',
    ['-DBREAK_LAG'],
    'the assumption broken by one tick (view lag plus commit time equal to SCOPE_SETTLE_MS): an apiserver does not see the label a settled replica admitted a lease on (v1 trace 1)',
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
