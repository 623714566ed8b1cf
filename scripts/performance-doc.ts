// `node scripts/performance-doc.ts BENCH.json [DOC]` (`npm run bench:doc -- BENCH.json`): rewrites the figure
// tables of docs/performance.md (or DOC) from the JSON of one `npm run bench -- --out BENCH.json` run. Each
// table sits between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`; everything outside those markers is
// prose and stays as written. A block the run has no figures for says so instead of keeping old numbers.
import { readFileSync, writeFileSync } from 'node:fs';

type Value = number | string | boolean | null | undefined;
type Figures = Record<string, Value>;

export interface BenchRun {
  machine: Record<string, Value | Record<string, { mean: number; max: number }>>;
  versions?: Record<string, string | undefined>;
  quick: boolean;
  only?: string | null;
  started_at?: string;
  finished_at?: string;
  wall_seconds: number;
  wall_seconds_by_benchmark: Record<string, number>;
  results: Record<string, Figures>;
}

/** A number as the tables show it: three significant figures, no more than two decimals. */
export function fmt(v: Value, digits?: number): string {
  if (v === undefined || v === null) return '–';
  if (typeof v !== 'number') return String(v);
  if (Number.isNaN(v)) return 'n/a';
  if (digits !== undefined) return v.toFixed(digits);
  if (Number.isInteger(v)) return v.toLocaleString('en-US');
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString('en-US');
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

/** A Markdown table; `numeric` right-aligns every column but the first. */
const table = (head: string[], rows: string[][], numeric = true): string =>
  [
    `| ${head.join(' | ')} |`,
    `|${head.map((_, i) => (i === 0 || !numeric ? '---' : '---:')).join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');

const status = (v: Value): string => (v === 'met' ? 'met' : v === 'missed' ? '**missed**' : fmt(v));

// ---- blocks ----

function machineBlock(run: BenchRun): string {
  const m = run.machine;
  const v = run.versions ?? {};
  const pepr = run.results.admission?.pepr_version ?? run.results.admission?.pepr_skipped;
  const pa = run.results['pod-admission'];
  const kueue = pa?.kueue_version ?? pa?.kueue_skipped;
  const byBench = (m.load_average_1m_by_benchmark ?? {}) as Record<string, { mean: number; max: number }>;
  const rows: string[][] = [
    [
      'run',
      `${run.started_at ?? '?'} – ${run.finished_at ?? '?'} (${fmt(run.wall_seconds, 0)} s)${run.quick ? ', **--quick**' : ''}${run.only ? `, only ${run.only}` : ''}`,
    ],
    [
      'CPU',
      `${fmt(m.cpus as number, 0)} × ${fmt(m.cpu as string)}, ${fmt(m.memory_gib as number, 1)} GiB RAM, ${fmt(m.os as string)}`,
    ],
    [
      'load average (1 min)',
      `${fmt(m.load_average_1m_before as number)} before (5 min ${fmt(m.load_average_5m_before as number)}), mean ${fmt(m.load_average_1m_mean_during as number)} and max ${fmt(m.load_average_1m_max_during as number)} during (sampled every 10 s), ${fmt(m.load_average_1m_after as number)} after`,
    ],
    [
      'load average by benchmark (mean / max)',
      Object.entries(byBench)
        .map(([name, l]) => `${name} ${fmt(l.mean)} / ${fmt(l.max)}`)
        .join(', ') || '–',
    ],
    ['Node.js', fmt(v.node ?? (m.node as string))],
    ['Kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler)', fmt(v.kubernetes)],
    ['etcd', fmt(v.etcd)],
    ['KWOK', fmt(v.kwok)],
    ['wrk', fmt(v.wrk)],
    ['Pepr (peer)', fmt(pepr)],
    ['Kueue (peer)', fmt(kueue)],
    ['commit', `${fmt(v.commit)} (${fmt(v.uncommitted_files)} files changed in the working tree)`],
    [
      'wall time by benchmark, s',
      Object.entries(run.wall_seconds_by_benchmark)
        .map(([k, s]) => `${k} ${fmt(s, 0)}`)
        .join(', '),
    ],
  ];
  return table(['Item', 'Value'], rows, false);
}

interface Goal {
  match: RegExp;
  describe: (key: string) => string;
  measured: (r: Figures, key: string) => string;
}

const GOALS: Record<string, Goal[]> = {
  'pod-admission': [
    {
      match: /^target_outside_scope_no_review_reaches_the_operator$/,
      describe: () => 'Pods outside the scope: no call of our webhooks by kube-apiserver',
      measured: (r) =>
        `${fmt(r.outside_scope_apiserver_webhook_calls, 0)} calls (apiserver_admission_webhook_request_total)`,
    },
    {
      match: /^target_added_p99_outside_scope_r(\d+)_at_most_5_ms$/,
      describe: (k) =>
        `added p99 of a Pod CREATE outside the scope ≤ 5 ms at ${/r(\d+)/.exec(k)?.[1]} Pods/s, no error at any rate`,
      measured: (r, k) => `${fmt(r[`outside_scope_r${/r(\d+)/.exec(k)?.[1]}_added_p99_ms`])} ms`,
    },
    {
      match: /^target_added_p99_in_scope_r(\d+)_at_most_100_ms$/,
      describe: (k) =>
        `added p99 of a Pod CREATE in the scope, outside managed chains ≤ 100 ms at ${/r(\d+)/.exec(k)?.[1]} Pods/s`,
      measured: (r, k) => `${fmt(r[`in_scope_r${/r(\d+)/.exec(k)?.[1]}_added_p99_ms`])} ms`,
    },
    {
      match: /^target_added_p99_managed_r(\d+)_at_most_150_ms$/,
      describe: (k) => `added p99 of a managed Pod CREATE ≤ 150 ms at ${/r(\d+)/.exec(k)?.[1]} Pods/s`,
      measured: (r, k) => `${fmt(r[`managed_r${/r(\d+)/.exec(k)?.[1]}_added_p99_ms`])} ms`,
    },
    {
      match: /^target_managed_at_most_2_api_reads_per_review$/,
      describe: () => 'managed Pods: at most 2 API reads per review',
      measured: (r) =>
        `${fmt(r.managed_mutate_api_reads_per_review, 2)} (mutating), ${fmt(r.managed_validate_api_reads_per_review, 2)} (validating)`,
    },
  ],
  leases: [
    {
      match: /^target_n(\d+)_held_within_15_seconds$/,
      describe: (k) =>
        `${/n(\d+)/.exec(k)?.[1]} lease-only BerthLeases all held ≤ 15 s after the first create`,
      measured: (r, k) => `${fmt(r[`n${/n(\d+)/.exec(k)?.[1]}_all_held_seconds`])} s`,
    },
    {
      match: /^target_at_most_1_status_write_per_lease_per_heartbeat$/,
      describe: () => 'status writes per lease per heartbeat ≤ 1 (at steady state)',
      measured: (r) =>
        sizes(r)
          .map((n) => `${fmt(r[`n${n}_status_writes_per_lease_per_heartbeat`])} (N = ${n})`)
          .join(', '),
    },
    {
      match: /^target_operator_rss_at_most_150_mib$/,
      describe: () => 'operator RSS ≤ 150 MiB (its own process)',
      measured: (r) =>
        sizes(r)
          .map((n) => `${fmt(r[`n${n}_operator_rss_mib`])} MiB (N = ${n})`)
          .join(', '),
    },
  ],
  nodetaint: [
    {
      match: /^target_(\d+)_nodes_synced_within_5_seconds$/,
      describe: (k) =>
        `initial sync of ${/_(\d+)_/.exec(k)?.[1]} Nodes ≤ 5 s (from the guard process's spawn)`,
      measured: (r) => `${fmt(r.initial_sync_processed_seconds)} s`,
    },
    {
      match: /^target_zero_writes_at_steady_state$/,
      describe: () => 'Node writes by the guard at steady state = 0',
      measured: (r) => `${fmt(r.steady_state_node_writes)} in ${fmt(r.steady_state_window_seconds, 0)} s`,
    },
    {
      match: /^target_taint_within_grace_plus_1_second$/,
      describe: () => 'NotReady agent → taint ≤ grace + 1 s',
      measured: (r) => `grace + ${fmt(r.not_ready_to_taint_after_grace_ms, 0)} ms`,
    },
    {
      match: /^target_guard_rss_at_most_200_mib$/,
      describe: () => 'guard RSS ≤ 200 MiB (its own process, at steady state)',
      measured: (r) => `${fmt(r.guard_rss_mib)} MiB (peak ${fmt(r.guard_peak_rss_mib)} MiB)`,
    },
  ],
  failover: [
    {
      match: /^target_crash_within_lease_duration_plus_retry_period$/,
      describe: () => 'leader crash (SIGKILL) → new leader reconciles ≤ lease duration + retry period',
      measured: (r) =>
        `${fmt(r.leader_crash_to_first_reconcile_seconds)} s (limit ${fmt((r.leader_election_lease_duration_seconds as number) + (r.leader_election_retry_period_seconds as number))} s)`,
    },
    {
      match: /^target_graceful_within_4_seconds$/,
      describe: () => 'leader SIGTERM → new leader reconciles ≤ 4 s',
      measured: (r) => `${fmt(r.leader_graceful_to_first_reconcile_seconds)} s`,
    },
    {
      match: /^target_managed_within_ttl_plus_heartbeat_plus_2_seconds$/,
      describe: () =>
        "holding cluster's operator SIGKILLed → all replicas ungated in the other cluster ≤ TTL + heartbeat + 2 s",
      measured: (r) =>
        `${fmt(r.managed_holder_killed_to_all_pods_ungated_seconds)} s (limit ${fmt((r.managed_ttl_seconds as number) + (r.managed_heartbeat_seconds as number) + 2)} s)`,
    },
  ],
  admission: [
    {
      match: /^target_a_throughput_ratio_c(\d+)_at_least_0_8$/,
      describe: (k) =>
        `bare server, (a): throughput ≥ 0.8 × the floor's at ${/c(\d+)/.exec(k)?.[1]} connections (context)`,
      measured: (r, k) => {
        const c = /c(\d+)/.exec(k)?.[1];
        return `${fmt(r[`a_no_read_c${c}_throughput_ratio`])} (CPU ratio ${fmt(r[`a_no_read_c${c}_cpu_per_review_ratio`])}; ${fmt(r[`a_no_read_c${c}_server_cpu_us_per_review`])} vs ${fmt(r[`floor_small_c${c}_server_cpu_us_per_review`])} µs CPU per review)`;
      },
    },
    {
      match: /^target_a_p99_c(\d+)_at_most_1_3_ms$/,
      describe: (k) => `bare server, (a): p99 ≤ 1.3 ms at ${/c(\d+)/.exec(k)?.[1]} connection (context)`,
      measured: (r, k) => {
        const c = /c(\d+)/.exec(k)?.[1];
        return `${fmt(r[`a_no_read_c${c}_p99_ms`])} ms (floor ${fmt(r[`floor_small_c${c}_p99_ms`])} ms)`;
      },
    },
  ],
};

function sizes(r: Figures): number[] {
  return [...new Set(Object.keys(r).flatMap((k) => /^n(\d+)_all_held_seconds$/.exec(k)?.[1] ?? []))]
    .map(Number)
    .sort((a, b) => a - b);
}

function goalsBlock(run: BenchRun): string {
  const rows: string[][] = [];
  for (const [bench, r] of Object.entries(run.results)) {
    for (const [key, value] of Object.entries(r)) {
      if (!key.startsWith('target_')) continue;
      const goal = (GOALS[bench] ?? []).find((g) => g.match.test(key));
      rows.push([
        bench,
        goal ? goal.describe(key) : `\`${key}\``,
        goal ? goal.measured(r, key) : '–',
        status(value),
      ]);
    }
  }
  if (rows.length === 0) return '_This run judged no goal._';
  return table(['benchmark', 'goal', 'measured', ''], rows, false);
}

function podAdmissionBlock(r: Figures): string {
  const rates = String(r.rates_pods_per_second ?? '')
    .split(' ')
    .filter(Boolean);
  const classes = ['outside_scope', 'in_scope', 'managed'];
  const rows: string[][] = [];
  for (const cls of classes) {
    for (const rate of rates) {
      const on = (f: string): Value => r[`${cls}_webhooks_r${rate}_${f}`];
      const off = (f: string): Value => r[`${cls}_none_r${rate}_${f}`];
      rows.push([
        cls,
        rate,
        `${fmt(off('p50_ms'))} / ${fmt(off('p99_ms'))} / ${fmt(off('max_ms'))}`,
        `${fmt(on('p50_ms'))} / ${fmt(on('p99_ms'))} / ${fmt(on('max_ms'))}`,
        `${fmt(r[`${cls}_r${rate}_added_p50_ms`])} / **${fmt(r[`${cls}_r${rate}_added_p99_ms`])}**`,
        `${fmt((off('errors') as number) + (on('errors') as number), 0)}`,
        `${fmt(on('mutate_api_reads_per_review'))} / ${fmt(on('validate_api_reads_per_review'))}`,
        `${fmt(on('validate_reviews_per_pod'))}`,
        `${fmt(on('mutate_server_ms_per_review'))} / ${fmt(on('validate_server_ms_per_review'))}`,
        fmt(on('operator_cpu_ms_per_pod')),
        `${fmt(on('operator_apf_wait_ms_per_request'))} / ${fmt(on('operator_apf_rejected'))}`,
        `${fmt(off('send_lag_p99_ms'))} / ${fmt(on('send_lag_p99_ms'))}`,
      ]);
    }
  }
  const waits: string[][] = [];
  for (const cls of classes) {
    for (const rate of rates) {
      const on = (f: string): Value => r[`${cls}_webhooks_r${rate}_${f}`];
      waits.push([
        cls,
        rate,
        `${fmt(on('mutate_server_ms_per_review'))} / ${fmt(on('validate_server_ms_per_review'))}`,
        fmt(on('read_ms_list_leases')),
        `${fmt(on('read_ms_get_workload'))} / ${fmt(on('apiserver_get_ms'))}`,
        `${fmt(on('operator_loop_lag_p99_ms'))} / ${fmt(on('operator_loop_lag_max_ms'))}`,
      ]);
    }
  }
  return [
    table(
      [
        'class',
        'Pods/s',
        'no webhook: p50 / p99 / max ms',
        'webhooks on (ours; the peer’s in its rows): p50 / p99 / max ms',
        'added p50 / p99 ms',
        'errors',
        'API reads per review (mutating / validating)',
        'validating reviews per Pod',
        'server ms per review (mutating / validating)',
        'CPU ms per Pod of the webhook process (operator; peer)',
        "operator's requests: APF wait ms / rejected",
        'send lag p99 ms (none / on)',
      ],
      [...rows, ...peerRows(r, rates)],
    ),
    '',
    "Where a review's time goes (with our webhooks):",
    '',
    table(
      [
        'class',
        'Pods/s',
        'server ms per review (mutating / validating)',
        'LIST BerthLeases, ms per read',
        'GET owner, ms per read: as the review waited / as kube-apiserver served it',
        "operator's event-loop delay p99 / max ms (its 10 ms sampling interval included)",
      ],
      waits,
    ),
    '',
    `API reads per review by class (mutating / validating, at the lowest rate): ${classes
      .map(
        (c) =>
          `${c} ${fmt(r[`${c}_mutate_api_reads_per_review`], 2)} / ${fmt(r[`${c}_validate_api_reads_per_review`], 2)}`,
      )
      .join(', ')}.`,
    '',
    `Pods per window: ${rates.map((rate, i) => `${fmt(r[`outside_scope_none_r${rate}_pods`], 0)} at ${rate}/s (${String(r.window_seconds ?? '').split(' ')[i] ?? '?'} s)`).join(', ')}, after ${fmt(r.warmup_seconds)} s of warm-up. Operator RSS after its windows: ${fmt(r.operator_rss_mib)} MiB. The managed lease: ${fmt(r.managed_lease_state)}. ${fmt(r.api_server)}.`,
    '',
    peerBlock(r, rates),
  ].join('\n');
}

// ---- the Kueue peer's rows (test/bench/pod-admission.ts, benchKueuePeer) ----

const PEER_CLASSES = ['kueue_managed', 'kueue_outside'];
/** Which of our classes each peer class is set against in the gap lines: [ours, peer, what]. */
const PEER_PAIRS: [string, string, string][] = [
  [
    'managed',
    'kueue_managed',
    'a Pod it manages (ours: a managed Pod; Kueue: a Pod in its namespace with the queue-name label)',
  ],
  [
    'in_scope',
    'kueue_managed',
    'a Pod in a namespace it serves (ours: in the scope, outside managed chains; Kueue: in its namespace with the queue-name label)',
  ],
  [
    'outside_scope',
    'kueue_outside',
    'a Pod it has nothing to do with (ours: a namespace outside the scope; Kueue: a namespace outside its managedJobsNamespaceSelector)',
  ],
];

/** The peer's rows of the main table, in its columns (its webhook reads its informer cache only). */
function peerRows(r: Figures, rates: string[]): string[][] {
  const rows: string[][] = [];
  for (const cls of PEER_CLASSES)
    for (const rate of rates) {
      const on = (f: string): Value => r[`${cls}_peer_r${rate}_${f}`];
      const off = (f: string): Value => r[`${cls}_none_r${rate}_${f}`];
      if (on('p50_ms') === undefined) continue;
      rows.push([
        `Kueue ${r.kueue_version ?? ''}: ${cls}`,
        rate,
        `${fmt(off('p50_ms'))} / ${fmt(off('p99_ms'))} / ${fmt(off('max_ms'))}`,
        `${fmt(on('p50_ms'))} / ${fmt(on('p99_ms'))} / ${fmt(on('max_ms'))}`,
        `${fmt(r[`${cls}_r${rate}_added_p50_ms`])} / **${fmt(r[`${cls}_r${rate}_added_p99_ms`])}**`,
        `${fmt((off('errors') as number) + (on('errors') as number), 0)}`,
        '0 / 0 (informer cache)',
        fmt(on('validate_reviews_per_pod')),
        `${fmt(on('mutate_server_ms_per_review'))} / ${fmt(on('validate_server_ms_per_review'))}`,
        fmt(on('kueue_cpu_ms_per_pod')),
        '–',
        `${fmt(off('send_lag_p99_ms'))} / ${fmt(on('send_lag_p99_ms'))}`,
      ]);
    }
  return rows;
}

/** What the peer spends its time on, and the gap to ours, below the main tables. */
function peerBlock(r: Figures, rates: string[]): string {
  if (r.kueue_skipped !== undefined) return `_The Kueue peer was skipped: ${fmt(r.kueue_skipped)}._`;
  if (r.kueue_failed !== undefined) return `_The Kueue peer failed: ${fmt(r.kueue_failed)}._`;
  if (r.kueue_version === undefined) return '_This run has no Kueue peer figures._';
  const rows: string[][] = [];
  for (const cls of PEER_CLASSES)
    for (const rate of rates) {
      const on = (f: string): Value => r[`${cls}_peer_r${rate}_${f}`];
      if (on('p50_ms') === undefined) continue;
      rows.push([
        cls,
        rate,
        `${fmt(on('mutate_server_ms_per_review'))} / ${fmt(on('validate_server_ms_per_review'))}`,
        `${fmt(on('mutate_apiserver_wait_ms_per_call'))} / ${fmt(on('validate_apiserver_wait_ms_per_call'))}`,
        `${fmt(on('mutate_reviews_per_pod'))} / ${fmt(on('validate_reviews_per_pod'))}`,
        `${fmt(on('kueue_cpu_ms_per_pod'))} / ${fmt(on('kueue_cpu_ms_per_pod_until_cleaned'))}`,
        `${fmt(on('kueue_api_requests_per_pod'))} / ${fmt(on('kueue_api_requests_per_pod_until_cleaned'))}`,
        fmt(on('workloads_created_per_pod')),
        fmt(on('pods_born_ungated')),
        fmt(on('cleanup_seconds')),
      ]);
    }
  const gaps: string[] = [];
  for (const [ours, peer, what] of PEER_PAIRS) {
    const cells = rates
      .filter(
        (rate) =>
          r[`${ours}_r${rate}_added_p99_ms`] !== undefined &&
          r[`${peer}_r${rate}_added_p99_ms`] !== undefined,
      )
      .map((rate) => {
        const a = r[`${ours}_r${rate}_added_p99_ms`] as number;
        const b = r[`${peer}_r${rate}_added_p99_ms`] as number;
        return `${rate}/s: ours ${fmt(a)} ms, Kueue ${fmt(b)} ms (${a - b >= 0 ? '+' : ''}${fmt(a - b)} ms)`;
      });
    if (cells.length > 0) gaps.push(`- ${what}: \`${ours}\` vs \`${peer}\`, ${cells.join('; ')}.`);
  }
  return [
    `Where the peer's time goes (Kueue ${fmt(r.kueue_version)}, its controller-manager alone; ${fmt(r.kueue_configuration)}):`,
    '',
    table(
      [
        'class',
        'Pods/s',
        'its server ms per review (mutating / validating)',
        "kube-apiserver's wait ms per webhook call (mpod / vpod)",
        'reviews per Pod (mutating / validating)',
        'Kueue CPU ms per Pod: window / until the Pods are gone',
        'Kueue API requests per Pod: window / until the Pods are gone',
        'Workloads created per Pod',
        'Pods born without its gate',
        'clean-up after the window, s',
      ],
      rows,
    ),
    '',
    `The gap in added p99 (ours minus the peer's; positive: ours adds more):`,
    '',
    ...(gaps.length > 0 ? gaps : ['- (no pair of classes measured in this run)']),
    '',
    `Kueue's Pod webhooks as registered: ${fmt(r.kueue_pod_webhooks)}. Run out of cluster: ${fmt(r.kueue_deviations)}. Kueue was started ${fmt(r.kueue_starts, 0)} time(s), once per switch to its mode.`,
  ].join('\n');
}

function admissionBlock(r: Figures): string {
  if (r.skipped) return `_Skipped: ${r.skipped}._`;
  const order = [
    'floor_small',
    'a_no_read',
    'pepr',
    'b_unmanaged',
    'c_managed',
    'floor_1mib',
    'd_update_1mib',
  ];
  const conns = [
    ...new Set(Object.keys(r).flatMap((k) => /^floor_small_c(\d+)_reviews_per_second$/.exec(k)?.[1] ?? [])),
  ]
    .map(Number)
    .sort((a, b) => a - b);
  const rows: string[][] = [];
  for (const s of order) {
    for (const c of conns) {
      const f = (name: string): Value => r[`${s}_c${c}_${name}`];
      if (f('reviews_per_second') === undefined) continue;
      rows.push([
        s,
        String(c),
        fmt(f('reviews_per_second'), 0),
        fmt(f('p50_ms')),
        fmt(f('p99_ms')),
        fmt(f('max_ms')),
        fmt(f('server_cpu_fraction')),
        fmt(f('server_cpu_us_per_review'), 0),
        fmt(f('api_reads_per_review')),
        fmt(f('throughput_ratio')),
        fmt(f('cpu_per_review_ratio')),
        fmt(f('p99_ratio')),
        fmt(f('errors'), 0),
      ]);
    }
  }
  return table(
    [
      'scenario',
      'conns',
      'reviews/s',
      'p50 ms',
      'p99 ms',
      'max ms',
      'server CPU',
      'CPU/review µs',
      'API reads/review',
      'throughput / floor',
      'CPU ratio (floor CPU/review ÷ ours)',
      'p99 / floor',
      'errors',
    ],
    rows,
  );
}

/** A figure table: one row per key (with a label), one column per value set. */
function keyTable(r: Figures, rows: [string, string][], head = ['Figure', 'Value']): string {
  return table(
    head,
    rows.filter(([key]) => key in r).map(([key, label]) => [label, fmt(r[key])]),
  );
}

function leasesBlock(r: Figures): string {
  const ns = sizes(r);
  const labels: [string, string][] = [
    ['all_held_seconds', 'all `held`, seconds after the first create'],
    ['create_seconds', 'creating them took, seconds'],
    ['operator_cpu_seconds_until_held', 'operator CPU seconds from the first create until all held'],
    ['reconciles_per_lease_until_held', 'reconciles per lease until held'],
    ['reconcile_errors_per_lease_until_held', 'reconcile errors per lease until held'],
    ['requeues_per_lease_until_held', 'requeues per lease until held'],
    ['api_requests_per_lease_until_held', 'operator API requests per lease until held'],
    ['api_get_requests_per_lease_until_held', 'of which GET'],
    ['api_post_requests_per_lease_until_held', 'of which POST'],
    ['api_put_requests_per_lease_until_held', 'of which PUT'],
    ['api_patch_requests_per_lease_until_held', 'of which PATCH'],
    [
      'api_requests_per_lease_per_heartbeat',
      'operator API requests per lease per heartbeat (incl. leader election)',
    ],
    ['status_writes_per_lease_per_heartbeat', 'of which status writes per lease per heartbeat'],
    ['central_requests_per_lease_per_heartbeat', 'central requests per lease per heartbeat'],
    ['operator_cpu_seconds_per_minute', 'operator CPU seconds per minute at steady state'],
    ['operator_rss_before_leases_mib', 'operator RSS before the first lease, MiB'],
    ['operator_rss_mib', 'operator RSS at steady state, MiB'],
    ['operator_heap_used_mib', 'operator V8 heap used at steady state, MiB'],
    ['bench_process_rss_mib', 'benchmark process (proxy, central, client) RSS, MiB'],
  ];
  return [
    table(
      ['Figure', ...ns.map((n) => `N = ${n.toLocaleString('en-US')}`)],
      labels.map(([key, label]) => [label, ...ns.map((n) => fmt(r[`n${n}_${key}`]))]),
    ),
    '',
    `Heartbeat ${fmt(r.heartbeat_interval_seconds, 0)} s, TTL ${fmt(r.ttl_seconds, 0)} s, steady-state window ${fmt(r.steady_state_window_heartbeats, 0)} heartbeats; operator ${fmt(r.operator_entry)}, \`${fmt(r.operator_env)}\`.`,
  ].join('\n');
}

function nodetaintBlock(r: Figures): string {
  return keyTable(r, [
    ['nodes', 'Nodes (each with a Ready agent Pod)'],
    ['ready_seconds', 'guard process spawn → /readyz 200, s'],
    ['initial_sync_processed_seconds', 'spawn → initial sync processed, s'],
    ['initial_sync_after_ready_seconds', 'of which after /readyz, s'],
    ['steady_state_reconciles_per_second', 'reconciles at steady state, per second'],
    ['steady_state_node_writes', 'Node writes by the guard at steady state'],
    ['steady_state_nodes_changed_by_anyone', 'Nodes changed by anyone in the window'],
    ['steady_state_cpu_seconds_per_minute', 'guard CPU at steady state, s/min'],
    ['not_ready_to_taint_ms', 'NotReady → taint, ms'],
    ['not_ready_to_taint_after_grace_ms', 'of which after the grace, ms'],
    ['guard_rss_mib', 'guard process RSS at steady state, MiB'],
    ['guard_peak_rss_mib', 'guard process peak RSS (VmHWM), MiB'],
  ]);
}

function failoverBlock(r: Figures): string {
  return keyTable(r, [
    ['leader_graceful_to_first_reconcile_seconds', 'graceful: SIGTERM → new leader’s first reconcile, s'],
    ['leader_graceful_to_lease_acquired_seconds', 'graceful: SIGTERM → Lease acquired, s'],
    ['leader_crash_to_first_reconcile_seconds', 'crash: SIGKILL → new leader’s first reconcile, s'],
    ['leader_crash_to_lease_acquired_seconds', 'crash: SIGKILL → Lease acquired, s'],
    ['managed_first_hold_seconds', 'managed: first hold with both replicas ungated, s'],
    [
      'managed_holder_killed_to_first_pod_ungated_seconds',
      'managed: holder’s operator SIGKILLed → first Pod ungated elsewhere, s',
    ],
    ['managed_holder_killed_to_all_pods_ungated_seconds', 'managed: → all Pods ungated elsewhere, s'],
    ['managed_skipped', 'managed'],
  ]);
}

function flatBlock(r: Figures): string {
  return table(
    ['key', 'value'],
    Object.entries(r).map(([k, v]) => [`\`${k}\``, fmt(v)]),
    false,
  );
}

const BLOCKS: Record<string, (run: BenchRun) => string> = {
  machine: machineBlock,
  goals: goalsBlock,
  'pod-admission': (run) => withResult(run, 'pod-admission', podAdmissionBlock),
  admission: (run) => withResult(run, 'admission', admissionBlock),
  leases: (run) => withResult(run, 'leases', leasesBlock),
  nodetaint: (run) => withResult(run, 'nodetaint', nodetaintBlock),
  failover: (run) => withResult(run, 'failover', failoverBlock),
  'api-client': (run) => withResult(run, 'api-client', flatBlock),
  apiserver: (run) => withResult(run, 'apiserver', flatBlock),
  central: (run) => withResult(run, 'central', flatBlock),
  helper: (run) => withResult(run, 'helper', flatBlock),
};

function withResult(run: BenchRun, name: string, render: (r: Figures) => string): string {
  const r = run.results[name];
  return r === undefined ? `_No \`${name}\` figures in this run._` : render(r);
}

/** The document with every marked block replaced by the run's figures. Throws on an unknown block. */
export function renderDoc(doc: string, run: BenchRun): string {
  return doc.replace(/<!-- bench:([a-z-]+) -->\n[\s\S]*?<!-- \/bench:\1 -->/g, (_, name: string) => {
    const render = BLOCKS[name];
    if (render === undefined) throw new Error(`unknown block "bench:${name}"`);
    return `<!-- bench:${name} -->\n${render(run)}\n<!-- /bench:${name} -->`;
  });
}

function main(argv: string[]): void {
  const [jsonPath, docPath = 'docs/performance.md', ...rest] = argv;
  if (jsonPath === undefined || rest.length > 0) {
    process.stderr.write('usage: node scripts/performance-doc.ts BENCH.json [DOC]\n');
    process.exit(2);
  }
  let run: BenchRun;
  try {
    run = JSON.parse(readFileSync(jsonPath, 'utf8')) as BenchRun;
  } catch (err) {
    process.stderr.write(`performance-doc: cannot read ${jsonPath}: ${(err as Error).message}\n`);
    process.exit(2);
  }
  if (typeof run !== 'object' || run === null || typeof run.results !== 'object') {
    process.stderr.write(`performance-doc: ${jsonPath} is not the output of npm run bench\n`);
    process.exit(2);
  }
  const doc = readFileSync(docPath, 'utf8');
  writeFileSync(docPath, renderDoc(doc, run));
  process.stderr.write(`performance-doc: ${docPath} rendered from ${jsonPath}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) main(process.argv.slice(2));
