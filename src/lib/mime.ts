/** A MIME type or pattern: `type/subtype`, `type/*` or `*\/*` (RFC 6838 token characters). */
const PATTERN = /^(?:\*\/\*|[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/(?:\*|[a-z0-9][a-z0-9!#$&^_.+-]{0,126}))$/;
const EXACT = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/;

/**
 * What normalizeMimeType reads as a MIME type, as a JSON Schema pattern: `type/subtype` in any case,
 * white space around it, parameters after a semicolon.
 */
export const CONTENT_TYPE_PATTERN =
  '^\\s*[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\\s*(?:;[\\s\\S]*)?$';

/** What an allowlist entry may be, trimmed and lower-cased (isMimePattern), as a JSON Schema pattern. */
export const MIME_PATTERN_PATTERN =
  '^\\s*(?:\\*/\\*|[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/(?:\\*|[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}))\\s*$';

export function isMimePattern(value: string): boolean {
  return PATTERN.test(value);
}

/** The bare, lower-cased type of a Content-Type value (parameters such as charset dropped), or undefined when malformed. */
export function normalizeMimeType(value: string): string | undefined {
  const bare = value.split(';')[0]!.trim().toLowerCase();
  return EXACT.test(bare) ? bare : undefined;
}

/** Splits a comma-separated allowlist; returns the entries, or the first malformed one. */
export function parseMimeList(list: string): { entries: string[] } | { invalid: string } {
  const entries = list.split(',').map((entry) => entry.trim().toLowerCase());
  const invalid = entries.find((entry) => !isMimePattern(entry));
  return invalid === undefined ? { entries: [...new Set(entries)] } : { invalid };
}

/** Whether the pattern `outer` admits everything `inner` (a type or pattern) admits. */
export function mimeCovers(outer: string, inner: string): boolean {
  if (outer === '*/*') return true;
  const [outerType, outerSub] = outer.split('/');
  const [innerType, innerSub] = inner.split('/');
  if (outerType !== innerType) return false;
  return outerSub === '*' || outerSub === innerSub;
}

export function mimeAllowed(patterns: readonly string[], mimeType: string): boolean {
  return patterns.some((pattern) => mimeCovers(pattern, mimeType));
}
