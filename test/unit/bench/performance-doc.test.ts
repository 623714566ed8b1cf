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
