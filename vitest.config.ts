import { defineConfig } from 'vitest/config';

// Every test runs on the embedded default; where CI provides PostgreSQL and Redis, the whole
// suite runs a second time against them (a fresh schema and Redis key prefix per run). Where CI
// also provides an S3 server, the tests that store files through Coffer (API, SDK, browser, client
// commands, scale-out, tracing, storage contract) run a third time on PostgreSQL with the files in S3, all in
// one shared bucket.
const all = ['test/**/*.test.ts'];
const projects: { name: string; include: string[]; env: Record<string, string> }[] = [
  { name: 'embedded', include: all, env: { COFFER_TEST_BACKEND: 'embedded' } },
];
if (process.env.COFFER_TEST_DATABASE_URL) {
  projects.push({ name: 'postgres', include: all, env: { COFFER_TEST_BACKEND: 'postgres' } });
  if (process.env.COFFER_TEST_S3_ENDPOINT)
    projects.push({
      name: 's3',
      include: [
        'test/api/**/*.test.ts',
        'test/client/**/*.test.ts',
        'test/browser/**/*.test.ts',
        'test/cli/client-commands.test.ts',
        'test/cli/scale-out.test.ts',
        'test/infra/tracing.test.ts',
        'test/contract/**/*.test.ts',
        'test/ingest/**/*.test.ts',
        'test/protocols/s3/checksums.test.ts',
        'test/protocols/s3/clients.test.ts',
        'test/protocols/s3/boto3.test.ts',
        'test/protocols/s3/side-effects.test.ts',
        'test/protocols/s3/access.test.ts',
        'test/protocols/s3/coffer-rules.test.ts',
        'test/protocols/s3/conditional-writes.test.ts',
        'test/protocols/s3/copies.test.ts',
        'test/protocols/s3/deletes.test.ts',
        'test/protocols/s3/delete-version.test.ts',
        'test/protocols/s3/folder-keys.test.ts',
        'test/protocols/s3/listings.test.ts',
        'test/protocols/s3/multipart.test.ts',
        'test/protocols/s3/new-key-races.test.ts',
        'test/protocols/s3/object-headers.test.ts',
        'test/protocols/s3/racing-writes.test.ts',
        'test/protocols/s3/reads.test.ts',
        'test/protocols/s3/request-ids.test.ts',
        'test/protocols/s3/scanned-keys.test.ts',
        'test/protocols/s3/stranded-completions.test.ts',
        'test/protocols/s3/versions.test.ts',
        'test/protocols/s3/writes.test.ts',
        'test/protocols/tus/**/*.test.ts',
      ],
      env: { COFFER_TEST_BACKEND: 'postgres', COFFER_TEST_STORAGE: 's3' },
    });
}

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // One database per worker process, shared by its test files: tests are isolated by data.
    isolate: false,
    pool: 'forks',
    projects: projects.map(({ name, include, env }) => ({ extends: true, test: { name, include, env } })),
  },
});
