import { defineConfig } from 'vitest/config';

// Three projects: `unit` (pure logic, no cluster), `integration` (real components against the real control
// plane: test/setup/controlplane.ts starts a shared one; files needing their own start it) and `e2e`
// (scenarios on control planes of each file's own, or on the clusters named by E2E_KUBECONFIG*).
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
          // The shared control plane, and Helm for the chart's tests (both built on first use).
          globalSetup: ['test/setup/controlplane.ts', 'test/setup/helm.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          // Each file starts its own control planes (test/e2e/env.ts); this builds their binaries first.
          globalSetup: ['test/e2e/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          // External clusters (E2E_KUBECONFIG) are shared by every file, and each file's operator covers
          // every namespace: one file at a time there.
          ...(process.env.E2E_KUBECONFIG ? { maxWorkers: 1 } : {}),
        },
      },
    ],
  },
});
