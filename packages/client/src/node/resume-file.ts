import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import type { ResumeEntry, ResumeStore } from '../resume.js';

/** $COFFER_RESUME_FILE, else ~/.coffer/uploads.json. */
export const defaultResumeFile = () =>
  process.env.COFFER_RESUME_FILE || join(homedir(), '.coffer', 'uploads.json');

/**
 * Resumable sessions in one JSON file, so that a new process (after a crash) finds them. Writes
 * replace the file atomically (write then rename) and are queued within the process.
 */
export function fileResumeStore(path: string = defaultResumeFile()): ResumeStore {
  let queue: Promise<unknown> = Promise.resolve();
  const read = async (): Promise<Record<string, ResumeEntry>> => {
    try {
      const parsed = JSON.parse(await readFile(path, 'utf8')) as unknown;
      return parsed && typeof parsed === 'object' && !Array.isArray(parsed)
        ? (parsed as Record<string, ResumeEntry>)
        : {};
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' || error instanceof SyntaxError) return {};
      throw error;
    }
  };
  const update = (change: (entries: Record<string, ResumeEntry>) => void) => {
    const run = queue.then(async () => {
      const entries = await read();
      change(entries);
      await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      const temporary = `${path}.${process.pid}.tmp`;
      await writeFile(temporary, `${JSON.stringify(entries, null, 2)}\n`, { mode: 0o600 });
      await rename(temporary, path);
    });
    queue = run.catch(() => {});
    return run;
  };
  return {
    get: async (key) => {
      await queue;
      return (await read())[key];
    },
    set: (key, entry) =>
      update((entries) => {
        entries[key] = entry;
      }),
    delete: (key) =>
      update((entries) => {
        delete entries[key];
      }),
  };
}
