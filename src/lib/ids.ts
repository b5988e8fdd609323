import { monotonicFactory } from 'ulid';

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
  | 'job';

// Monotonic, so ids made in the same millisecond still sort in creation order ("newest first" is id order).
const nextUlid = monotonicFactory();

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid()}`;
}

/** Whether `value` has the shape of an id with this prefix (cheap check before any query). */
export function isId(prefix: IdPrefix, value: string): boolean {
  return value.startsWith(`${prefix}_`) && /^[0-9A-HJKMNP-TV-Z]{26}$/.test(value.slice(prefix.length + 1));
}
