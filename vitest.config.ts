import { defineConfig } from 'vitest/config';

// Every test runs on the embedded default; where CI provides PostgreSQL and Redis, the whole
// suite runs a second time against them (a fresh schema and Redis key prefix per run).
const backends = ['embedded', ...(process.env.COFFER_TEST_DATABASE_URL ? ['postgres'] : [])];

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // One database per worker process, shared by its test files: tests are isolated by data.
    isolate: false,
    pool: 'forks',
    projects: backends.map((backend) => ({
      extends: true,
      test: { name: backend, include: ['test/**/*.test.ts'], env: { COFFER_TEST_BACKEND: backend } },
    })),
  },
});
