import { defineConfig } from 'vitest/config';

// `npm run test:e2e`: scenarios against a real cluster named by E2E_KUBECONFIG (e.g. a kind cluster).
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
