/**
 * Listing and search at scale, through HTTP: one project of `--files N` files (default a million, seeded
 * by bench/list-seed.ts) on PostgreSQL, and the latency of GET /v1/projects/{id}/files, one request at
 * a time, `total` included in every answer:
 *   - the first page; every page of a walk by cursor to page 1,000; page 1,000 by cursor again and again;
 *   - page 1,000 by offset, against the first page (target: at most 3× its p99);
 *   - each filter: q, tags, category, status, date range, size range, metadata, folder.
 * p50 and p99 over COFFER_BENCH_LIST_REQUESTS requests each (default 100, after 10 unmeasured), in each
 * of COFFER_BENCH_LIST_ROUNDS rounds on the same files (default 1; a row pools its rounds); the
 * baseline of every row is GET /health/live measured the same way (the floor of an HTTP round trip).
 * Targets: p99 ≤ 15 ms for the first page and cursor pages, ≤ 50 ms for every filter.
 *
 * Environment: COFFER_BENCH_LIST_REQUESTS, COFFER_BENCH_LIST_ROUNDS. Only on PostgreSQL (`--db postgres`).
 */
import { join } from 'node:path';
import { request } from 'undici';
import { agent, createProject, expectStatus, type Project } from './client.ts';
import { startCoffer } from './coffer-server.ts';
import { databaseFor } from './database.ts';
import { type Bench, envInteger, progress } from './lib.ts';
import { CUSTOMERS, seedFiles, TAGS } from './list-seed.ts';
import { fmt, percentile } from './measure.ts';
import type { Row, Section } from './report.ts';

const PAGE_TARGET_MS = 15;
const FILTER_TARGET_MS = 50;
const OFFSET_TARGET = 3;
const PAGES = 1000;

interface FileList {
  items: { id: string }[];
  total: number;
  next_cursor: string | null;
}

/** Milliseconds of each of `count` requests made one after another (after `warm` unmeasured ones). */
export async function latencies(
  count: number,
  warm: number,
  send: () => Promise<unknown>,
): Promise<number[]> {
  for (let i = 0; i < warm; i++) await send();
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await send();
    times.push(performance.now() - start);
  }
  return times;
}

function list(project: Project, query: string): () => Promise<FileList> {
  return async () => {
    const reply = await project.api<FileList>('GET', `/files?${query}`);
    expectStatus(reply, 200, `GET /files?${query}`);
    return reply.body;
  };
}

export const listBench: Bench = {
  name: 'list',
  description:
    'GET …/files p50/p99 on a project of a million files (PostgreSQL): pages, cursor, offset, filters',
  async run(context) {
    if (context.db !== 'postgres') {
      return [
        {
          title: 'Listing a project of many files',
          rows: [],
          notes: ['skipped: `list` seeds its files through SQL on PostgreSQL; run it with --db postgres'],
        },
      ];
    }
    const files = Number(context.options.get('files') ?? 1_000_000);
    if (!Number.isSafeInteger(files) || files < 1)
      throw new Error(`--files: expected a count ≥ 1, got ${files}`);
    const count = envInteger('COFFER_BENCH_LIST_REQUESTS', 100);
    const rounds = envInteger('COFFER_BENCH_LIST_ROUNDS', 1);
    const warm = Math.min(10, count);
    const dataDir = join(context.scratch, 'list');
    const server = await startCoffer(dataDir, context.server.mode);
    try {
      const project = await createProject(server);
      progress(`list: seeding ${files} files`);
      const seeded = await seedFiles((await databaseFor(dataDir))!, project.id, files, (done) =>
        progress(`list: ${done} of ${files} files`),
      );

      const live = () =>
        latencies(count, warm, async () => {
          const response = await request(`${server.url}/health/live`, { dispatcher: agent });
          await response.body.dump();
        });
      const twoMonthsAgo = new Date(Date.now() - 60 * 86_400_000).toISOString().slice(0, 10);
      const monthAgo = new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10);
      const filters: [string, string][] = [
        ['q (substring of the filename)', 'q=invoice-12'],
        ['tags (one tag)', `tags=${TAGS[4]}`],
        ['tags (two tags)', `tags=${TAGS[0]}&tags=${TAGS[1]}`],
        ['category', 'category=video'],
        ['status (rare)', 'status=processing'],
        ['status (most files)', 'status=ready'],
        ['date range (a month)', `date_from=${twoMonthsAgo}&date_to=${monthAgo}`],
        ['size range', `size_min=${10 * 1024 * 1024}&size_max=${20 * 1024 * 1024}`],
        ['metadata', `metadata=${encodeURIComponent(JSON.stringify({ customer: `cust_${CUSTOMERS - 1}` }))}`],
        ['folder', `folder_id=${seeded.folderIds[10]}`],
        ['folder (root)', 'folder_id=root'],
        ['category + status + date', `category=image&status=ready&date_from=${twoMonthsAgo}`],
      ];

      // Every round measures every case again on the same files; each row pools the rounds' requests.
      const liveTimes: number[] = [];
      const firstTimes: number[] = [];
      const walk: number[] = [];
      const cursorTimes: number[] = [];
      const offsetTimes: number[] = [];
      const filterTimes = filters.map((): number[] => []);
      const roundP99s = filters.map((): string[] => []);
      const totals: string[] = [];
      let total = 0;
      let pages = 0;
      let offset = 0;
      for (let round = 1; round <= rounds; round++) {
        liveTimes.push(...(await live()));
        progress(`list: round ${round}: first page`);
        const firstPage = list(project, 'limit=50');
        total = (await firstPage()).total;
        firstTimes.push(...(await latencies(count, warm, async () => void (await firstPage()))));

        progress(`list: round ${round}: walking ${PAGES} pages by cursor`);
        let cursor: string | null = null;
        for (pages = 0; pages < PAGES; pages++) {
          const start = performance.now();
          const page: FileList = await list(project, `limit=50${cursor ? `&cursor=${cursor}` : ''}`)();
          walk.push(performance.now() - start);
          if (!page.next_cursor) break;
          cursor = page.next_cursor;
        }
        const lastCursor = cursor;
        if (lastCursor) {
          cursorTimes.push(
            ...(await latencies(
              count,
              warm,
              async () => void (await list(project, `limit=50&cursor=${lastCursor}`)()),
            )),
          );
        }
        offset = (Math.min(pages, PAGES) - 1) * 50;
        offsetTimes.push(
          ...(await latencies(
            count,
            warm,
            async () => void (await list(project, `limit=50&offset=${offset}`)()),
          )),
        );

        for (const [i, [name, query]] of filters.entries()) {
          progress(`list: round ${round}: filter ${name}`);
          const send = list(project, `limit=50&${query}`);
          const found = (await send()).total;
          if (round === 1) totals.push(`${name} ${found}`);
          const times = await latencies(count, warm, async () => void (await send()));
          filterTimes[i]!.push(...times);
          roundP99s[i]!.push(fmt.ms(percentile(times, 99)));
        }
      }

      const baseline = `${fmt.ms(percentile(liveTimes, 99))} p99 live`;
      const row = (name: string, times: number[], targetMs?: number): Row => {
        const p99 = percentile(times, 99);
        return {
          benchmark: name,
          coffer: `${fmt.ms(percentile(times, 50))} / ${fmt.ms(p99)}`,
          value: p99,
          unit: 'ms p99',
          baseline,
          ...(targetMs === undefined ? {} : { target: `p99 ≤ ${targetMs} ms`, met: p99 <= targetMs }),
        };
      };
      const filterRows = filters.map(([name], i) =>
        row(`filter: ${name}`, filterTimes[i]!, FILTER_TARGET_MS),
      );

      const firstP99 = percentile(firstTimes, 99);
      const offsetP99 = percentile(offsetTimes, 99);
      const section: Section = {
        title: `Listing a project of ${files.toLocaleString('en')} files on PostgreSQL (p50 / p99 of ${count} requests${rounds > 1 ? ` in each of ${rounds} rounds` : ''}, one at a time)`,
        rows: [
          {
            benchmark: 'GET /health/live (reference)',
            coffer: `${fmt.ms(percentile(liveTimes, 50))} / ${fmt.ms(percentile(liveTimes, 99))}`,
            value: percentile(liveTimes, 99),
            unit: 'ms p99',
          },
          row('first page (50, with total)', firstTimes, PAGE_TARGET_MS),
          row(`cursor pages 1 to ${walk.length / rounds} (the walk)`, walk, PAGE_TARGET_MS),
          ...(cursorTimes.length > 0 ? [row(`page ${pages} by cursor`, cursorTimes, PAGE_TARGET_MS)] : []),
          {
            benchmark: `page ${pages} by offset (${offset})`,
            coffer: `${fmt.ms(percentile(offsetTimes, 50))} / ${fmt.ms(offsetP99)}`,
            value: offsetP99,
            unit: 'ms p99',
            baseline: `${fmt.ms(firstP99)} p99 first page`,
            ratio: offsetP99 / firstP99,
            target: `≤ ${fmt.ratio(OFFSET_TARGET)}`,
            met: offsetP99 <= OFFSET_TARGET * firstP99,
          },
          ...filterRows,
        ],
        notes: [
          `seeded ${files.toLocaleString('en')} files (${total.toLocaleString('en')} not deleted) and ${seeded.folderIds.length} folders in ${seeded.seconds.toFixed(1)} s (bench/list-seed.ts: INSERT … SELECT over generate_series, then VACUUM ANALYZE)`,
          `totals: ${totals.join('; ')}`,
          ...(rounds > 1
            ? [
                `filters' p99 by round: ${filters.map(([name], i) => `${name} ${roundP99s[i]!.join(' / ')}`).join('; ')}`,
              ]
            : []),
          'each answer is 50 files with their exact total; requests are sequential through one keep-alive connection',
        ],
      };
      return [section];
    } finally {
      await server.close();
    }
  },
};
