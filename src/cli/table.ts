/** Plain-text output of the client commands. */

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${UNITS[unit]}`;
}

/** Columns padded to their widest cell; control characters of names are shown escaped, never run. */
export function table(headers: string[], rows: string[][]): string {
  const safe = (cell: string) => JSON.stringify(cell).slice(1, -1);
  const cells = [headers, ...rows.map((row) => row.map(safe))];
  const widths = headers.map((_, column) => Math.max(...cells.map((row) => row[column]!.length)));
  return cells
    .map((row) =>
      row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  '),
    )
    .join('\n');
}
