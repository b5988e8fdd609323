/** The JSON entries a page keeps in localStorage under keys starting with `prefix`, by key. */
export function storedEntries(prefix: string): Record<string, unknown> {
  const entries: Record<string, unknown> = {};
  for (let i = 0; i < localStorage.length; i++) {
    const key = localStorage.key(i);
    if (key?.startsWith(prefix)) entries[key] = JSON.parse(localStorage.getItem(key) ?? 'null');
  }
  return entries;
}
