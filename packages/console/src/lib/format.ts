/** Numbers, sizes and dates as people read them. */

const UNITS = ['B', 'KB', 'MB', 'GB', 'TB'] as const;
const FACTORS: Record<string, number> = {
  b: 1,
  kb: 1024,
  kib: 1024,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
  tb: 1024 ** 4,
  tib: 1024 ** 4,
};

const integer = new Intl.NumberFormat();

export const count = (value: number) => integer.format(value);

/** 1536 → "1.5 KB" (binary units, as file managers show them). */
export function bytes(value: number): string {
  let size = value;
  let unit = 0;
  while (size >= 1024 && unit < UNITS.length - 1) {
    size /= 1024;
    unit += 1;
  }
  const digits = unit === 0 || size >= 100 ? 0 : 1;
  return `${size.toFixed(digits)} ${UNITS[unit]}`;
}

/**
 * "10 MB", "1.5gb", "500" (bytes) → a byte count; undefined for an empty text; NaN when it cannot
 * be read (the field then says so).
 */
export function parseSize(text: string): number | undefined {
  const trimmed = text.trim().toLowerCase();
  if (trimmed === '') return undefined;
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/.exec(trimmed);
  const factor = match ? FACTORS[match[2] || 'b'] : undefined;
  if (!match || factor === undefined) return Number.NaN;
  return Math.round(Number(match[1]) * factor);
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/** An ISO timestamp in the reader's time zone; "—" for none. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : dateTime.format(date);
}

/** The first instant of a `<input type=date>` day in local time, as ISO 8601. */
export const startOfDay = (day: string) => new Date(`${day}T00:00:00`).toISOString();
/** The last millisecond of that day. */
export const endOfDay = (day: string) => new Date(`${day}T23:59:59.999`).toISOString();

/** Words of a comma- or newline-separated list, trimmed, without empties. */
export const listOf = (text: string) =>
  text
    .split(/[,\n]/)
    .map((item) => item.trim())
    .filter(Boolean);
