// The renderer of docs/performance.md (scripts/performance-doc.ts): tables between markers come from the
// run, the prose around them stays, and a run without a benchmark's figures says so instead of keeping
// the old numbers. Also the open-loop generator's percentile.
import { describe, expect, it } from 'vitest';
import { type BenchRun, fmt, renderDoc } from '../../../scripts/performance-doc.ts';
import { percentile } from '../../bench/open-loop.ts';

const run = (results: BenchRun['results']): BenchRun => ({
  machine: { cpus: 2, cpu: 'test cpu', memory_gib: 4, load_average_1m_before: 0.5 },
  versions: { node: 'v24.0.0', kubernetes: 'v1.36.3', etcd: 'v3.6.16', kwok: 'v0.8.0' },
  quick: false,
  wall_seconds: 10,
  wall_seconds_by_benchmark: {},
  results,
});

const doc = [
  'Prose before.',
  '<!-- bench:machine -->',
  'old machine',
  '<!-- /bench:machine -->',
  'Prose between.',
  '<!-- bench:nodetaint -->',
  '| old | 1 |',
  '<!-- /bench:nodetaint -->',
  '<!-- bench:goals -->',
  'old goals',
  '<!-- /bench:goals -->',
  'Prose after.',
].join('\n');

describe('performance-doc', () => {
  it('replaces every marked block and keeps the prose', () => {
    const out = renderDoc(
      doc,
      run({
        nodetaint: { guard_rss_mib: 123.4, guard_peak_rss_mib: 130, target_guard_rss_at_most_200_mib: 'met' },
      }),
    );
    expect(out).toContain('Prose before.\n<!-- bench:machine -->');
    expect(out).toContain('Prose between.');
    expect(out).toContain('Prose after.');
    expect(out).not.toContain('old machine');
    expect(out).not.toContain('| old | 1 |');
    expect(out).toContain(
      '| Kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler) | v1.36.3 |',
    );
    expect(out).toContain('| guard process RSS at steady state, MiB | 123 |');
    expect(out).toMatch(/\| nodetaint \| guard RSS ≤ 200 MiB .*\| 123 MiB \(peak 130 MiB\) \| met \|/);
  });

  it('marks a missed goal and says when a benchmark has no figures', () => {
    const out = renderDoc(doc, run({ leases: { target_operator_rss_at_most_150_mib: 'missed' } }));
    expect(out).toContain('**missed**');
    expect(out).toContain('_No `nodetaint` figures in this run._');
  });

  it('renders the Kueue peer rows in the pod-admission table, with its time and the gap to ours', () => {
    const block = '<!-- bench:pod-admission -->\nold\n<!-- /bench:pod-admission -->';
    const cell = (p50: number, p99: number): Record<string, number> => ({
      p50_ms: p50,
      p99_ms: p99,
      max_ms: p99 + 1,
      errors: 0,
      send_lag_p99_ms: 1,
      mutate_server_ms_per_review: 0.8,
      validate_server_ms_per_review: 0.6,
      kueue_cpu_ms_per_pod: 2.5,
    });
    const figures: Record<string, number | string> = {
      rates_pods_per_second: '50',
      managed_r50_added_p99_ms: 700,
      outside_scope_r50_added_p99_ms: 500,
      kueue_version: 'v0.17.0',
      kueue_configuration: 'integrations.frameworks [pod]',
    };
    for (const [cls, on, off] of [
      ['kueue_managed', cell(12, 70), cell(6, 25)],
      ['kueue_outside', cell(10, 40), cell(5, 12)],
    ] as const) {
      for (const [k, v] of Object.entries(on)) figures[`${cls}_peer_r50_${k}`] = v;
      for (const [k, v] of Object.entries(off)) figures[`${cls}_none_r50_${k}`] = v;
      figures[`${cls}_r50_added_p50_ms`] = on.p50_ms! - off.p50_ms!;
      figures[`${cls}_r50_added_p99_ms`] = on.p99_ms! - off.p99_ms!;
    }
    const out = renderDoc(block, run({ 'pod-admission': figures }));
    expect(out).toContain(
      '| Kueue v0.17.0: kueue_managed | 50 | 6 / 25 / 26 | 12 / 70 / 71 | 6 / **45** | 0 | 0 / 0 (informer cache) |',
    );
    expect(out).toContain('`managed` vs `kueue_managed`, 50/s: ours 700 ms, Kueue 45 ms (+655 ms)');
    expect(out).toContain('`outside_scope` vs `kueue_outside`, 50/s: ours 500 ms, Kueue 28 ms (+472 ms)');
    const skipped = renderDoc(
      block,
      run({
        'pod-admission': { rates_pods_per_second: '50', kueue_skipped: 'npm run kueue:build failed: x' },
      }),
    );
    expect(skipped).toContain('_The Kueue peer was skipped: npm run kueue:build failed: x._');
  });

  it('refuses a block it does not know', () => {
    expect(() => renderDoc('<!-- bench:nope -->\nx\n<!-- /bench:nope -->', run({}))).toThrow(/bench:nope/);
  });

  it('formats figures to three significant digits and NaN as n/a', () => {
    expect(fmt(1234.5)).toBe('1,235');
    expect(fmt(12.345)).toBe('12.3');
    expect(fmt(1.2345)).toBe('1.23');
    expect(fmt(3)).toBe('3');
    expect(fmt(Number.NaN)).toBe('n/a');
    expect(fmt(undefined)).toBe('–');
  });
});

describe('percentile (nearest rank)', () => {
  it('picks the value at the rank, NaN when empty', () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(xs, 50)).toBe(50);
    expect(percentile(xs, 99)).toBe(99);
    expect(percentile(xs, 100)).toBe(100);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });
});
