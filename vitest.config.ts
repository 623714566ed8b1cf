import { defineConfig } from 'vitest/config';

// Three projects: `unit` (pure logic, no cluster), `integration` and `e2e` (real components against the
// real control plane: test/setup/controlplane.ts starts a shared one; files needing their own start it).
export default defineConfig({
  test: {
    pool: 'forks',
    // The machines have two cores; each integration file may run a control plane of its own.
    maxWorkers: 2,
    // In CI also write a JSON report, from which .ci/run prints its `N passed, N failed` line.
    reporters: process.env.CI ? ['default', ['json', { outputFile: '.vitest-report.json' }]] : ['default'],
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], testTimeout: 30_000, hookTimeout: 30_000 },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/setup/controlplane.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
