/**
 * Memory of a backup of the embedded database, in this process: COFFER_BENCH_BACKUP_FILES (default
 * 100,000) files seeded into a fresh embedded database, then
 *   1. the backup's snapshot (Db.snapshot: the database folder tarred and gzipped as it is read,
 *      written to a file), its peak RSS growth over the RSS before it;
 *   2. baseline: PGlite's own dumpDataDir('gzip') of the same database (the whole tarball in memory),
 *      written to a file the same way.
 * The target is a flat snapshot: its growth at most 64 MiB whatever the database's size.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { PGlite } from '@electric-sql/pglite';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import { openPglite } from '../src/infra/db.ts';
import { migrate } from '../src/infra/migrate.ts';
import { writeHashed } from '../src/modules/backups/manifest.ts';
import { type Bench, envInteger, MiB, progress } from './lib.ts';
import { fmt } from './measure.ts';
import type { Section } from './report.ts';

const FLAT_TARGET = 64 * MiB;
const SEED_BATCH = 20_000;

/** Runs `work`, sampling the RSS every 5 ms: its peak growth over the RSS before it. */
async function peakGrowth<T>(work: () => Promise<T>): Promise<{ result: T; growth: number }> {
  global.gc?.();
  const before = process.memoryUsage().rss;
  let peak = before;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 5);
  try {
    const result = await work();
    return { result, growth: Math.max(peak, process.memoryUsage().rss) - before };
  } finally {
    clearInterval(timer);
  }
}

export const backup: Bench = {
  name: 'backup',
  description: 'memory of a backup of the embedded database (streamed snapshot against PGlite dumpDataDir)',
  async run({ scratch }) {
    const files = envInteger('COFFER_BENCH_BACKUP_FILES', 100_000);
    const dataDir = join(scratch, 'backup-bench');
    const db = await openPglite(dataDir);
    await migrate(db);
    progress(`backup: seeding ${files} files`);
    await db.exec(`INSERT INTO organizations (id, name) VALUES ('org_bench', 'bench');
      INSERT INTO projects (id, organization_id, name, settings, bucket)
      VALUES ('proj_bench', 'org_bench', 'bench', '{}', 'backup-bench')`);
    for (let from = 1; from <= files; from += SEED_BATCH) {
      await db.exec(`INSERT INTO files (id, project_id, status, filename, content_type, size_bytes, category,
          storage_key, metadata, tags)
        SELECT 'file_' || lpad(g::text, 26, '0'), 'proj_bench', 'ready', 'photo-' || g || '.jpg', 'image/jpeg',
          1000 + g, 'image', 'proj_bench/file_' || g || '/' || md5(g::text),
          jsonb_build_object('customer', 'c' || (g % 5000), 'note', md5(g::text)), ARRAY['tag' || (g % 40)]
        FROM generate_series(${from}, ${Math.min(files, from + SEED_BATCH - 1)}) AS g`);
    }
    progress('backup: streamed snapshot');
    const streamed = await peakGrowth(() =>
      db.snapshot!((tarball) => writeHashed(tarball, join(scratch, 'backup-streamed.tar.gz'))),
    );
    await db.close();

    progress('backup: PGlite dumpDataDir');
    const pglite = await PGlite.create({ dataDir: join(dataDir, 'pglite'), extensions: { pg_trgm } });
    const dumped = await peakGrowth(async () =>
      writeHashed(
        Readable.fromWeb((await pglite.dumpDataDir('gzip')).stream() as never),
        join(scratch, 'backup-dumped.tar.gz'),
      ),
    );
    await pglite.close();
    rmSync(dataDir, { recursive: true, force: true });

    const section: Section = {
      title: `Backup of an embedded database of ${files} files`,
      rows: [
        {
          benchmark: `snapshot memory (tarball ${fmt.mib(streamed.result.size)})`,
          coffer: fmt.mib(streamed.growth),
          baseline: `${fmt.mib(dumped.growth)} (dumpDataDir, ${fmt.mib(dumped.result.size)})`,
          target: `≤ ${fmt.mib(FLAT_TARGET)}`,
          met: streamed.growth <= FLAT_TARGET,
          value: streamed.growth / MiB,
          unit: 'MiB',
        },
      ],
      notes: [
        'Peak RSS growth of this process while the snapshot is written to a file (sampled every 5 ms).',
      ],
    };
    return [section];
  },
};
