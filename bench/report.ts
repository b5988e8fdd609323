/** The result table: rows, printed as Markdown and written as JSON (`--json`). */
import { out } from './lib.ts';
import { fmt } from './measure.ts';

/** The table row of server memory kept after a benchmark's transfers, against `limit`. */
export function retainedRssRow(benchmark: string, startRss: number, endRss: number, limit: number): Row {
  return {
    benchmark,
    coffer: `${endRss >= startRss ? '+' : '−'}${fmt.mib(Math.abs(endRss - startRss))}`,
    baseline: `${fmt.mib(startRss)} → ${fmt.mib(endRss)}`,
    target: `< ${fmt.mib(limit)}`,
    met: endRss - startRss < limit,
  };
}

export interface Row {
  benchmark: string;
  coffer: string;
  baseline?: string;
  /** coffer / baseline, printed as a percentage. */
  ratio?: number;
  target?: string;
  met?: boolean;
  /** The measured number and its unit, for --json; read from `coffer` ("170 uploads/s") when absent. */
  value?: number;
  unit?: string;
}

/** The leading number of a table cell and the unit after it ("−12 MiB" → −12, "MiB"). */
function quantity(text: string | undefined): { value?: number; unit?: string } {
  const match = /^([+−-]?)(\d+(?:\.\d+)?)\s*(.*)$/.exec(text?.trim() ?? '');
  if (!match) return {};
  return {
    value: Number(match[2]) * (match[1] === '−' || match[1] === '-' ? -1 : 1),
    unit: match[3] || undefined,
  };
}

/** Every row as data: what `--json FILE` writes, so that runs can be compared. */
export function jsonRows(sections: Section[]) {
  return sections.flatMap((section) =>
    section.rows.map((row) => {
      const measured = row.value === undefined ? quantity(row.coffer) : { value: row.value, unit: row.unit };
      return {
        section: section.title,
        name: row.benchmark.trim(),
        value: measured.value ?? null,
        unit: measured.unit ?? null,
        text: row.coffer,
        baseline: row.baseline ?? null,
        baseline_value: quantity(row.baseline).value ?? null,
        ratio: row.ratio ?? null,
        target: row.target ?? null,
        met: row.met ?? null,
      };
    }),
  );
}

export interface Section {
  title: string;
  rows: Row[];
  notes: string[];
}

export function printTable(sections: Section[]): void {
  const header = ['benchmark', 'coffer', 'baseline (same run)', 'ratio', 'target', 'met'];
  const cells = (row: Row) => [
    row.benchmark,
    row.coffer,
    row.baseline ?? '',
    row.ratio === undefined ? '' : fmt.ratio(row.ratio),
    row.target ?? '',
    row.met === undefined ? '' : row.met ? 'yes' : 'NO',
  ];
  const all = sections.flatMap((section) => section.rows.map(cells));
  const widths = header.map((title, column) =>
    Math.max(title.length, ...all.map((line) => line[column]!.length)),
  );
  const line = (values: string[]) =>
    `| ${values.map((value, column) => (column === 0 || column === 5 ? value.padEnd(widths[column]!) : value.padStart(widths[column]!))).join(' | ')} |`;
  const rule = `|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`;
  for (const section of sections) {
    out();
    out(`## ${section.title}`);
    out();
    out(line(header));
    out(rule);
    for (const row of section.rows) out(line(cells(row)));
    if (section.notes.length > 0) out();
    for (const note of section.notes) out(`- ${note}`);
  }
}
