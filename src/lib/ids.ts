import { randomFillSync } from 'node:crypto';
import { decodeTime, encodeTime, monotonicFactory, ulid } from 'ulid';

export type IdPrefix =
  | 'org'
  | 'proj'
  | 'file'
  | 'fld'
  | 'ver'
  | 'session'
  | 'wh'
  | 'dlv'
  | 'key'
  | 'tok'
  | 'evt'
  | 'job'
  | 'aud';

// ulid draws one random byte per character; drawn from the system one at a time, they cost more
// than the rest of an upload's id making. A pool refilled 4 KiB at a time serves them instead.
const randomPool = Buffer.alloc(4096);
let randomAt = randomPool.length;
function randomFraction(): number {
  if (randomAt === randomPool.length) {
    randomFillSync(randomPool);
    randomAt = 0;
  }
  return randomPool[randomAt++]! / 256;
}

// Monotonic, so ids made in the same millisecond still sort in creation order ("newest first" is id order).
const nextUlid = monotonicFactory(randomFraction);

/** A ULID of its own (not monotonic): time-sortable to the millisecond, random after that. */
export function randomUlid(): string {
  return ulid(undefined, randomFraction);
}

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid()}`;
}

/**
 * An id with `prefix` on the ULID of `id`: for a record that takes the place in creation order of
 * another, planned before it (new content in the place of the write that brought it).
 */
export function idBeside(prefix: IdPrefix, id: string): string {
  return `${prefix}_${id.slice(id.indexOf('_') + 1)}`;
}

/** The moment an id was made, to the millisecond (its ULID's time part). */
export function timeOfId(id: string): Date {
  return new Date(decodeTime(id.slice(id.indexOf('_') + 1)));
}

/**
 * The lowest (`first`) or highest (`last`) id with this prefix that can be made at `time`: the
 * bounds of a range of ids by creation time, in byte order (ids are stored with COLLATE "C").
 */
export function idBound(prefix: IdPrefix, time: Date, edge: 'first' | 'last'): string {
  const clamped = Math.min(Math.max(time.getTime(), 0), 2 ** 48 - 1);
  return `${prefix}_${encodeTime(clamped)}${(edge === 'first' ? '0' : 'Z').repeat(16)}`;
}

/** Whether `value` has the shape of an id with this prefix (cheap check before any query). */
/** What isId accepts, as a JSON Schema pattern. */
export const idPattern = (prefix: IdPrefix) => `^${prefix}_[0-9A-HJKMNP-TV-Z]{26}$`;

export function isId(prefix: IdPrefix, value: string): boolean {
  return value.startsWith(`${prefix}_`) && /^[0-9A-HJKMNP-TV-Z]{26}$/.test(value.slice(prefix.length + 1));
}
