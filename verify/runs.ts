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

/** The safety runs of one model: (name, kind, expect, defines, why, extra). */
const runsOf =
  (model: string) =>
  (
    name: string,
    kind: RunKind,
    expect: RunSpec['expect'],
    defines: readonly string[],
    why: string,
    extra: Partial<ModelRun> = {},
  ): ModelRun => ({ name, kind, model, mode: 'safety', expect, defines, why, ...extra });

const lease = runsOf('lease.pml');
const adm = runsOf('admission.pml');
const scope = runsOf('scope.pml');

/** The upgrade at a bound the CI budget holds: one Pod slot, no lost answers. */
const UPGRADE_BOUND = ['-DUPGRADE', '-DLOSSES=0', '-DNP=1'];

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
    ['-DHOLE_DEADLINE_FROM_RECEIPT', '-DLEAD=0', '-DF_PART', '-DF_DELAY', '-DOFFSET=2', '-DFAULTS=3'],
    'measuring the TTL from the answer lets a cluster whose clock is behind run past the central expiry (without the stop lead, which hides an error up to its length)',
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
  // ---- the stop lead (--stop-lead, STOP_LEAD of the profile): the timing assumption, within the bound ----
  lease(
    'lease: Pods take long to stop (the bounded grace)',
    'property',
    'pass',
    ['-DT_TERM=30', '-DF_PART', '-DF_DELAY', '-DOFFSET=1', '-DFAULTS=3'],
    "Pods whose own stop takes 30 ticks: the drain's grace bound ends their stop before the deadline, and the activation ended the stop lead before it",
  ),
  lease(
    'lease: a late reconcile within the lead',
    'property',
    'pass',
    ['-DLAG=1', '-DF_PART', '-DF_DELAY', '-DFAULTS=3'],
    'a due reconcile that starts a tick late still stops Pods (that stop at once) by the deadline',
    { deep: ['-DLAG=1', '-DT_TERM=30', '-DF_PART', '-DF_DELAY', '-DFAULTS=3'] },
  ),
  lease(
    'lease: clock drift within the lead',
    'property',
    'pass',
    ['-DDRIFT=1', '-DF_PART', '-DF_DELAY', '-DFAULTS=3'],
    'a clock that measures the TTL a tick long still stops Pods (that stop at once) before the central expiry',
    { deep: ['-DDRIFT=1', '-DT_TERM=30', '-DF_PART', '-DF_DELAY', '-DFAULTS=3'] },
  ),
  lease(
    'lease: a leader crash within the failover bound failoverMarginProblem accepts',
    'property',
    'pass',
    ['-DFAILOVER_TICKS=FAILOVER_ACCEPTED', '-DF_CRASH', '-DF_DELAY', '-DDELAY=4', '-DFAULTS=2'],
    'TTL 30 s, heartbeat 10 s, the default stop lead: a crash after a renewal answered late is safe when the failover bound is one the TTLBelowFailover rule accepts (ttl − heartbeat > failover + acquire bound + lead)',
    { profile: 3 },
  ),
  // ---- teeth: past the bound (LAG + the Pods' stop + DRIFT > LEAD) the model fails ----
  lease(
    'teeth: Pods that take time to stop and a late reconcile, past the lead',
    'teeth',
    'counterexample',
    ['-DT_TERM=1', '-DLAG=1', '-DF_PART'],
    'LAG 1 + a Pod stop of 1 tick > a lead of 1 tick: the Pod still runs when the other cluster starts',
    { replay: true, deep: ['-DT_TERM=30', '-DLAG=5', '-DF_PART'] },
  ),
  lease(
    'teeth: a reconcile later than the lead',
    'teeth',
    'counterexample',
    ['-DLAG=2', '-DF_PART'],
    'a reconcile due at the end of the activation that starts 2 ticks late stops the Pods after the central expiry',
    { deep: ['-DLAG=6', '-DF_PART'] },
  ),
  lease(
    'teeth: clock drift beyond the lead',
    'teeth',
    'counterexample',
    ['-DDRIFT=2', '-DF_PART'],
    'a clock that measures the TTL 2 ticks long stops the Pods after the central expiry',
    { deep: ['-DDRIFT=6', '-DF_PART'] },
  ),
  lease(
    'hole 6: no stop lead (the Go original)',
    'hole',
    'counterexample',
    ['-DLEAD=0', '-DT_TERM=1', '-DF_PART'],
    'the stop begins at the deadline: a Pod that takes a tick to stop still runs when the other cluster starts',
  ),
  // ---- findings: what the lead does not cover ----
  lease(
    'finding: a crash during a central outage',
    'finding',
    'counterexample',
    ['-DF_CRASH', '-DF_PART', '-DF_DELAY', '-DFAULTS=3'],
    'a leader that crashes shortly before an unrenewable deadline leaves the Pods running until its successor, past the lead',
    { replay: true },
  ),
  lease(
    'finding: a leader crash with the default timings',
    'finding',
    'counterexample',
    ['-DF_CRASH', '-DF_DELAY', '-DDELAY=4', '-DFAULTS=3'],
    'TTL 30 s, heartbeat 10 s, the default leader election (19.4 s): a crash after a renewal leaves the Pods running past the central expiry (TTLBelowFailover warns about this spec)',
    { replay: true, profile: 3 },
  ),
  lease(
    'proposal: a stop lead of the failover bound covers a crash during an outage',
    'proposal',
    'pass',
    ['-DLEAD=FAILOVER', '-DF_CRASH', '-DF_PART', '-DF_DELAY', '-DFAULTS=3'],
    'a lead of the failover bound covers a leader crash at any time (not the default: it needs a TTL above heartbeat + 2.5 s + failover)',
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
    'scope: two operator replicas whose informers relist',
    'property',
    'pass',
    ['-DHA_OP'],
    "a replica's since taken anew when its informer relists (nextScopeEntry): the scope holds with views that jump over versions",
    { deep: ['-DHA', '-DHA_OP'] },
  ),
  scope(
    'scope: the upgrade',
    'property',
    'pass',
    [...UPGRADE_BOUND, '-DUSER=3'],
    "narrowing two settle periods after the guards were seen live, once every holder's namespace has been shown in scope by the leader's informer for the settle period",
    { deep: [...UPGRADE_BOUND, '-DUSER=2'] },
  ),
  scope(
    'hole (fixed): a relist keeps since across a skipped change',
    'hole',
    'counterexample',
    ['-DHA_OP', '-DV2_FIRST'],
    "the code before the fix: the leader's informer jumps from leaving to leaving over enabled (a relist), its since is kept, the exit removes the label while the other replica, still showing enabled settled, admits a targeted BerthLease; the target is admitted unreviewed",
  ),
  scope(
    'hole (fixed): the upgrade narrows on a label an apiserver does not show yet',
    'hole',
    'counterexample',
    ['-DUPGRADE', '-DV2_FIRST'],
    "the code before the fix: a holder's label removed through an apiserver without the guards and set again by a user; the plan finds it labelled and narrows, and the apiserver, still showing it unlabelled, admits a Pod of the chain unreviewed",
  ),
  scope(
    'scope hole: narrowing one settle period after the guards',
    'hole',
    'counterexample',
    ['-DUPGRADE', '-DHOLE_ONE_GUARD_SETTLE'],
    "the leader's informer may not show yet a label removed while the guards spread: the holders' settle check alone passes on a stale view",
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
    [...UPGRADE_BOUND, '-DUSER=3', '-DHOLE_EARLY_NARROW'],
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
  // ---- helper.pml: the injected helper (acquire, renew, the lead, the probe kill, the kubelet) ----
  ...helperRuns(),
];

/** The checks of helper.pml (docs/verification.md, "The helper model"). */
function helperRuns(): ModelRun[] {
  const helper = runsOf('helper.pml');
  // RESTART=2: a restarted main container waits for the lease (what docs/injection.md assumed); ROBUST:
  // a counterexample must overlap for a whole tick, not only meet at one instant.
  return [
    helper(
      'helper: message faults, a restarted app gated',
      'property',
      'pass',
      ['-DRESTART=2', '-DF_LOSS', '-DF_DELAY', '-DF_STALL', '-DFAULTS=3'],
      'at-most-once and tokens with lost, delayed and stalled acquire and renew calls, the fence, the probe kill within its grace, provided a restarted main container waits for the lease',
      { deep: ['-DRESTART=2', '-DF_LOSS', '-DF_DELAY', '-DF_STALL', '-DFAULTS=4'] },
    ),
    helper(
      'helper: partitions, a restarted app gated',
      'property',
      'pass',
      ['-DRESTART=2', '-DF_PART', '-DF_DELAY', '-DF_LOSS', '-DFAULTS=2'],
      'the same with a Pod partitioned from the central server for longer than the TTL: fenceAt = send + TTL - lead stops the app in time',
      { deep: ['-DRESTART=2', '-DF_PART', '-DF_DELAY', '-DF_LOSS', '-DFAULTS=3'] },
    ),
    helper(
      'hole 2: the probe kill takes the Pod grace',
      'hole',
      'counterexample',
      ['-DROBUST', '-DRESTART=2', '-DHOLE_PROBE_GRACE', '-DF_PART', '-DFAULTS=1'],
      "a liveness probe without its own terminationGracePeriodSeconds kills with the Pod's 30 s: the app runs long after the other Pod acquired and started",
    ),
    helper(
      'hole 3 (helper): renewing past the local deadline',
      'hole',
      'counterexample',
      [
        '-DROBUST',
        '-DRESTART=2',
        '-DHOLE_RENEW_PAST_DEADLINE',
        '-DF_PART',
        '-DF_DELAY',
        '-DDELAY=2',
        '-DFAULTS=2',
      ],
      'a helper that counts the window from the answer and keeps the app running while a renewal is out runs past the central expiry',
      { profile: 2 },
    ),
    helper(
      'finding: the kubelet restarts the killed app',
      'finding',
      'counterexample',
      ['-DROBUST', '-DRESTART=1', '-DF_PART', '-DFAULTS=1'],
      "restartPolicy Always: a main container killed by the probe is restarted (at once, then after the back-off) without waiting for the lease, and runs until the next probe while the other Pod's app runs",
    ),
    helper(
      'finding: the first restart alone',
      'finding',
      'counterexample',
      ['-DROBUST', '-DRESTART=1', '-DFIRST_RESTART_ONLY', '-DF_PART', '-DF_DELAY', '-DF_LOSS', '-DFAULTS=2'],
      'even without the back-off restarts, the immediate first restart runs up to one probe period and the kill past the fence the lead was sized for',
    ),
    helper(
      'helper: message faults, restarting the Pod on a loss',
      'property',
      'pass',
      ['-DRESTART=3', '-DF_LOSS', '-DF_DELAY', '-DF_STALL', '-DFAULTS=3'],
      '--injection-restart-pod-on-loss: the sidecar exits on a loss with the code of its RestartAllContainers rule, every container is killed within RESTART_POD_STOP_MS and berth-acquire runs again before the app; at-most-once holds with the kubelet restarting',
    ),
    helper(
      'helper: partitions, restarting the Pod on a loss',
      'property',
      'pass',
      ['-DRESTART=3', '-DF_PART', '-DF_DELAY', '-DF_LOSS', '-DFAULTS=2'],
      'the same with partitions longer than the TTL',
    ),
    helper(
      'teeth: the Pod restarted slower than the lead',
      'teeth',
      'counterexample',
      ['-DROBUST', '-DRESTART=3', '-DRAC_SLOW', '-DF_PART', '-DFAULTS=1'],
      'restarting the Pod holds only if the kubelet has killed every container within the lead of the sidecar exit',
    ),
    helper(
      'finding: timers that run slow',
      'finding',
      'counterexample',
      ['-DRESTART=2', '-DDRIFT=1', '-DF_PART', '-DFAULTS=1'],
      "the lead has no allowance for a node's timers measuring the window long: the kill margin is used up by the kill",
    ),
  ];
}
