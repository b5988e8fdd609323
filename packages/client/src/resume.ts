/** Where resumable multipart uploads remember their session, keyed by what identifies the file. */

/** What a resumable upload keeps between runs. */
export interface ResumeEntry {
  uploadId: string;
  fileId: string;
  /** Parts are cut again with exactly this size, so stored parts keep matching. */
  partSize: number;
  /** ISO 8601 moment the session started. */
  createdAt: string;
}

type Maybe<T> = T | Promise<T>;

/** Any key-value store, sync or async: a Map, localStorage through localStorageStore, a file, a database. */
export interface ResumeStore {
  get(key: string): Maybe<ResumeEntry | null | undefined>;
  set(key: string, entry: ResumeEntry): Maybe<unknown>;
  delete(key: string): Maybe<unknown>;
}

export interface ResumeIdentity {
  projectId: string;
  filename: string;
  size: number;
  contentType: string;
  lastModified?: number | undefined;
}

/** The key of an upload: the same file (name, size, type, modification time when known) in the same project. */
export const resumeKey = (id: ResumeIdentity): string =>
  `coffer-upload:${JSON.stringify([id.projectId, id.filename, id.size, id.contentType, id.lastModified ?? null])}`;

const isEntry = (value: unknown): value is ResumeEntry => {
  const entry = value as ResumeEntry | null;
  return (
    typeof entry?.uploadId === 'string' &&
    typeof entry.fileId === 'string' &&
    Number.isSafeInteger(entry.partSize) &&
    entry.partSize > 0
  );
};

/** Reads an entry, treating anything malformed as absent. */
export async function readEntry(store: ResumeStore, key: string): Promise<ResumeEntry | undefined> {
  const entry = await store.get(key);
  return isEntry(entry) ? entry : undefined;
}

/** A store in a Web Storage area (localStorage by default): entries survive a reload. */
export function localStorageStore(storage: Storage = globalThis.localStorage): ResumeStore {
  return {
    get(key) {
      const text = storage.getItem(key);
      if (text === null) return undefined;
      try {
        return JSON.parse(text) as ResumeEntry;
      } catch {
        return undefined;
      }
    },
    set: (key, entry) => storage.setItem(key, JSON.stringify(entry)),
    delete: (key) => storage.removeItem(key),
  };
}

/** localStorage when the page has one (it throws in some sandboxed frames), else memory for this page. */
export function browserResumeStore(): ResumeStore {
  try {
    if (globalThis.localStorage) return localStorageStore(globalThis.localStorage);
  } catch {
    // storage denied
  }
  return new Map<string, ResumeEntry>();
}
