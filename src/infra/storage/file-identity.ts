/**
 * What tells one stored file from another at the same path: a file replaced under the same name
 * (even by bytes with the same MD5) is another inode or has another modification time.
 */
export function fileIdentity(stats: { dev: number; ino: number; size: number; mtimeMs: number }): string {
  return `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeMs}`;
}
