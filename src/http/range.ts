import type { ByteRange } from '../infra/storage/object-store.ts';
import { rangeNotSatisfiable } from './errors.ts';

/**
 * The single range a Range header asks for; undefined serves the whole object (no header, a malformed
 * one, or several ranges). A range starting past the end is 416 RANGE_NOT_SATISFIABLE.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | undefined {
  const match = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  const first = match[1] === '' ? undefined : Number(match[1]);
  const last = match[2] === '' ? undefined : Number(match[2]);
  let range: ByteRange | undefined;
  if (first === undefined) {
    if (last! > 0 && size > 0) range = { start: Math.max(0, size - last!), end: size - 1 };
  } else {
    if (last !== undefined && last < first) return undefined;
    if (first < size) range = { start: first, end: Math.min(last ?? size - 1, size - 1) };
  }
  if (!range) throw rangeNotSatisfiable(size);
  return range;
}
