/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for tests: every line is
 * a comment, a HELP or TYPE line, or a sample whose family was declared by a TYPE line before it;
 * anything else throws, so a malformed exposition fails the test that reads it.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  /** The sample's own name (a histogram's `…_bucket`, `…_sum`, `…_count`). */
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  /** Each family's declared type, by family name. */
  types: Map<string, MetricType>;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const SUFFIXES: Record<MetricType, string[]> = {
  counter: [''],
  gauge: [''],
  untyped: [''],
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
};

function unescapeLabel(value: string): string {
  return value.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
}

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const match = LABEL.exec(text);
    if (!match) throw new Error(`malformed labels: ${line}`);
    const [, name, value] = match;
    if (name! in labels) throw new Error(`label ${name} repeated: ${line}`);
    labels[name!] = unescapeLabel(value!);
    if (match[3] === '') break;
  }
  return labels;
}

function parseValue(text: string, line: string): number {
  if (text === '+Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  // Prometheus reads values with Go's ParseFloat, which takes NaN in any case (prom-client writes `Nan`).
  if (/^nan$/i.test(text)) return Number.NaN;
  const value = Number(text);
  if (text === '' || Number.isNaN(value)) throw new Error(`malformed value: ${line}`);
  return value;
}

/** The family a sample belongs to: its name, or its name less the suffix its declared type allows. */
function familyOf(name: string, types: Map<string, MetricType>): string | undefined {
  for (const [family, type] of types) {
    if (SUFFIXES[type].some((suffix) => name === family + suffix)) return family;
  }
  return undefined;
}

export function parseExposition(text: string): Exposition {
  const types = new Map<string, MetricType>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const [, keyword, name, rest] = line.match(/^#\s*(HELP|TYPE)\s+(\S+)\s*(.*)$/) ?? [];
      if (!keyword) continue; // a plain comment
      if (!NAME.test(name!)) throw new Error(`malformed metric name: ${line}`);
      if (keyword === 'TYPE') {
        if (!TYPES.has(rest!) || types.has(name!)) throw new Error(`malformed or repeated TYPE: ${line}`);
        types.set(name!, rest as MetricType);
      }
      continue;
    }
    const match = line.match(SAMPLE);
    if (!match) throw new Error(`malformed sample: ${line}`);
    const [, name, labels, value] = match;
    if (!familyOf(name!, types)) throw new Error(`sample of an undeclared family: ${line}`);
    samples.push({
      name: name!,
      labels: labels ? parseLabels(labels, line) : {},
      value: parseValue(value!, line),
    });
  }
  return { types, samples };
}

/** GET /metrics of the metrics listener on `port`: its text, read strictly. */
export async function scrapeMetrics(port: number): Promise<{ text: string; metrics: Exposition }> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  if (response.status !== 200) throw new Error(`GET /metrics answered ${response.status}`);
  const type = response.headers.get('content-type') ?? '';
  if (!/^text\/plain; version=0\.0\.4/.test(type)) throw new Error(`GET /metrics answered ${type}`);
  const text = await response.text();
  return { text, metrics: parseExposition(text) };
}
