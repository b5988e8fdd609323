/**
 * How deep JSON text nests, counted on the text itself before it is parsed: anything that walks a
 * parsed value recursively (validators, size checks, serializers) is then safe from a body nested
 * thousands of levels deep. Answers true as soon as the depth passes `limit`.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (inString) {
      if (char === 0x5c)
        i++; // a backslash escapes the next character
      else if (char === 0x22) inString = false;
    } else if (char === 0x22) inString = true;
    else if (char === 0x7b || char === 0x5b) {
      if (++depth > limit) return true;
    } else if (char === 0x7d || char === 0x5d) depth--;
  }
  return false;
}

/** The deepest nesting a JSON body or JSON-valued parameter may have. */
export const MAX_JSON_DEPTH = 64;
