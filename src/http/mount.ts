/** Whether a request URL is under `mount` (an endpoint's prefix), by its path alone: a query string does not move it out. */
export function isUnder(mount: string, url: string): boolean {
  const path = url.split('?', 1)[0]!;
  return path === mount || path.startsWith(`${mount}/`);
}
