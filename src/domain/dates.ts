import { badRequest } from './errors.ts';

/** A date, or a date and time with optional seconds, fraction and offset (as a JSON Schema pattern: no flags). */
export const ISO_8601_PATTERN =
  '^(\\d{4}-\\d{2}-\\d{2})(?:[Tt ](\\d{2}:\\d{2})(?::(\\d{2})(?:\\.(\\d+))?)?([Zz]|[+-]\\d{2}:?\\d{2})?)?$';
const ISO_8601 = new RegExp(ISO_8601_PATTERN);
const DAY_MS = 86_400_000;

/**
 * A query's ISO 8601 date or timestamp, read as UTC when it carries no offset (400 naming `field`
 * otherwise). A date alone stands for its first millisecond, or with `wholeDay` its last (a `to`
 * date includes the whole day).
 */
export function parseDate(field: string, value: string | undefined, wholeDay = false): Date | undefined {
  if (value === undefined) return undefined;
  const match = ISO_8601.exec(value);
  if (match) {
    const [, date, time, seconds = '00', fraction = '', zone = 'Z'] = match;
    const wallClock = `${date}T${time ?? '00:00'}:${seconds}`;
    const offset = zone.toUpperCase() === 'Z' ? 'Z' : `${zone.slice(0, 3)}:${zone.slice(-2)}`;
    const parsed = Date.parse(`${wallClock}.${fraction.padEnd(3, '0').slice(0, 3)}${offset}`);
    // Date.parse rolls 2026-02-31 over into March: only a wall clock that reads back unchanged exists.
    const asUtc = Date.parse(`${wallClock}Z`);
    const exists = !Number.isNaN(asUtc) && new Date(asUtc).toISOString().startsWith(wallClock);
    if (!Number.isNaN(parsed) && exists) {
      return new Date(wholeDay && time === undefined ? parsed + DAY_MS - 1 : parsed);
    }
  }
  throw badRequest(`${field} must be an ISO 8601 date or timestamp`, { field });
}
