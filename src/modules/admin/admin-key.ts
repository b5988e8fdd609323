import type { Config } from '../../config.ts';
import type { Db } from '../../infra/db.ts';
import { getOrCreateSetting } from '../../infra/server-settings.ts';
import { randomSecret, sha256Hex } from '../../lib/secrets.ts';

export const ADMIN_KEY_PREFIX = 'coffer_admin_';

/**
 * The hash of the admin key: of COFFER_ADMIN_KEY when set, else of a key generated on the first
 * start. Only the hash is stored; `generated` holds the key once, for the caller to print.
 */
export async function resolveAdminKey(
  db: Db,
  config: Pick<Config, 'adminKey'>,
): Promise<{ hash: string; generated?: string }> {
  if (config.adminKey) return { hash: sha256Hex(config.adminKey) };
  const key = `${ADMIN_KEY_PREFIX}${randomSecret()}`;
  const stored = await getOrCreateSetting(db, 'admin_key_sha256', () => sha256Hex(key));
  return stored.created ? { hash: stored.value, generated: key } : { hash: stored.value };
}
