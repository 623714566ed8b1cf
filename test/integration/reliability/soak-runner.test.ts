// The soak runner (`npm run soak`, test/soak/) in a tiny configuration: a few seconds of churn and
// faults against two clusters (control planes the run starts itself), with a fencing token deliberately
// moved backwards halfway through. The run must notice exactly that breach and fail on it, while
// everything else works (churn happened, health was sampled, the leases converged after the faults).
// The CLI refuses bad arguments.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_OPTIONS, runSoak } from '../../soak/soak.ts';

describe('npm run soak', () => {
  it('a tiny run fails on an injected invariant breach, and only on that', async () => {
    const lines: string[] = [];
    const outDir = mkdtempSync(join(tmpdir(), 'berth-soak-test-'));
    const summary = await runSoak({
      ...DEFAULT_OPTIONS,
      // Each churn action is a few API calls through admission (up to a second each on two busy cores,
      // where the in-process fake took microseconds): 8 s make enough of them.
      durationMs: 8_000,
      seed: 42,
      sampleMs: 500,
      churnEveryMs: 100,
      faultChance: 0.3,
      limits: { workloads: 2, leaseOnly: 2, nodes: 2, agents: 2 },
      injectBreach: true,
      outDir,
      log: (line) => lines.push(line),
    });
    expect(summary.ok).toBe(false);
    // The run's log goes with a failure: it names the injection and every fault in force.
    expect(summary.breaches, lines.join('\n')).toHaveLength(1);
    expect(summary.breaches[0]).toMatchObject({ kind: 'token-decrease' });
    expect(lines.some((l) => l.startsWith('injected: '))).toBe(true);
    // Event-loop lag depends on the machine: not asserted here.
    expect(summary.failures.filter((f) => !f.startsWith('event-loop lag'))).toEqual([
      '1 invariant breach(es)',
    ]);
    expect(summary.convergence).toMatchObject({ ok: true, pending: [] });
    // Churn happened. How much fits in 8 s is the machine's speed (4 actions in a full-suite run beside
    // other work, dozens alone), so only its presence is asserted.
    const actions = Object.values(summary.actions).reduce((n, a) => n + a.ok + a.failed, 0);
    expect(actions).toBeGreaterThan(0);
    expect(summary.harness.samples).toBeGreaterThan(2);
    // Every product process was sampled from outside (too few samples to judge a trend: no verdict).
    expect(Object.keys(summary.processes).sort()).toEqual([
      'central',
      'helper',
      'operator-east',
      'operator-west',
    ]);
    for (const p of Object.values(summary.processes)) {
      expect(p.samples).toBeGreaterThan(0);
      expect(p.heap.first).toBeGreaterThan(0);
      expect(p.handles.first).toBeGreaterThan(0);
    }
    expect(existsSync(summary.svg)).toBe(true);
    rmSync(outDir, { recursive: true, force: true });
    // The build (tsc) and two control planes start before the churn (10-35 s each on two busy cores), and
    // convergence may take its 60 s bound: the run reports that rather than time out.
  }, 240_000);

  it('refuses bad arguments with its usage, exit code 2', async () => {
    const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ['test/soak/run.ts', '--minutes', 'soon'],
        { timeout: 20_000 },
        (err, _stdout, stderr) => resolve({ code: (err as { code?: number } | null)?.code ?? 0, stderr }),
      );
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      '--minutes: want a positive number, got soon\nusage: npm run soak -- [--minutes N] [--seed S] [--inject-breach] [--out-dir DIR] [--svg FILE] [--heap-snapshots]\n',
    );
  });
});
