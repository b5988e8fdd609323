import type { Cache } from './cache.ts';

/**
 * Read-through caching of JSON values. The cache only ever speeds things up: when it is
 * unreachable the value is loaded from the source of truth, and misses are not cached.
 */
export async function readThrough<T>(
  cache: Cache,
  key: string,
  ttlSeconds: number,
  load: () => Promise<T | undefined>,
): Promise<T | undefined> {
  const hit = await cache.get(key).catch(() => undefined);
  if (hit !== undefined) return JSON.parse(hit) as T;
  const value = await load();
  if (value !== undefined) await cache.set(key, JSON.stringify(value), ttlSeconds).catch(() => {});
  return value;
}

export async function evict(cache: Cache, key: string): Promise<void> {
  await cache.del(key).catch(() => {});
}
