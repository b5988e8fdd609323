import type { Db } from './db.ts';

/**
 * Returns the stored value of `key`, storing `make()` first when there is none. Servers racing
 * on a fresh database all end up with the one value that was inserted first.
 */
export async function getOrCreateSetting(
  db: Db,
  key: string,
  make: () => string,
): Promise<{ value: string; created: boolean }> {
  const candidate = make();
  const inserted = await db.query(
    'INSERT INTO server_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING RETURNING key',
    [key, candidate],
  );
  if (inserted.length > 0) return { value: candidate, created: true };
  const [row] = await db.query<{ value: string }>('SELECT value FROM server_settings WHERE key = $1', [key]);
  return { value: row!.value, created: false };
}
