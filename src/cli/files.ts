/**
 * The client commands of `coffer`: upload, ls, download and rm against a running Coffer, built on
 * @coffer/client. Configured by COFFER_URL, COFFER_API_KEY and COFFER_PROJECT, or by flags.
 * Exit codes: 0 done, 1 the API (or the network) refused, 2 usage.
 */
import { createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { type Client, createClient, type FileObject, isCofferError } from '@coffer/client';
import { type Bars, progressBars } from './progress.ts';
import { formatBytes, table } from './table.ts';

export class UsageError extends Error {}

export const CLIENT_USAGE = `Client commands (COFFER_URL, COFFER_API_KEY, COFFER_PROJECT or --url, --api-key, --project):
  upload PATH… [--folder PATH] [--tag TAG]… [--metadata JSON] [--json]
                        upload files (multipart when large), with a progress bar per file
  ls [--q TEXT] [--status S] [--category C] [--tag TAG]… [--folder-id ID] [--date-from T]
     [--date-to T] [--size-min N] [--size-max N] [--metadata JSON] [--limit N] [--cursor C]
     [--all] [--json]   list files, newest first, as a table (or JSON)
  download FILE_ID [-o PATH]
                        save a file's bytes (to its own name in this folder by default)
  rm FILE_ID            delete a file`;

const CONNECTION = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  project: { type: 'string' },
} as const;

interface Target {
  client: Client;
  projectId: string;
}

function connect(values: { url?: string; 'api-key'?: string; project?: string }): Target {
  const baseUrl = values.url ?? process.env.COFFER_URL ?? 'http://localhost:8080';
  const apiKey = values['api-key'] ?? process.env.COFFER_API_KEY;
  const projectId = values.project ?? process.env.COFFER_PROJECT;
  if (!apiKey) throw new UsageError('an API key is needed: set COFFER_API_KEY or pass --api-key');
  if (!projectId) throw new UsageError('a project is needed: set COFFER_PROJECT or pass --project');
  return { client: createClient({ baseUrl, apiKey }), projectId };
}

function parse<T extends ParseArgsOptionsConfig>(args: string[], options: T) {
  try {
    const config = {
      args,
      options: { ...CONNECTION, ...options },
      allowPositionals: true,
      strict: true,
    } as const;
    return parseArgs<typeof config>(config);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function jsonObject(text: string | undefined, flag: string): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError(`${flag} must be a JSON object`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UsageError(`${flag} must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

function number(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value)) throw new UsageError(`${flag} must be a number`);
  return value;
}

const print = (text: string) => process.stdout.write(`${text}\n`);

/** The id of the folder at `path` (a/b/c), created with its parents where missing, like mkdir -p. */
async function folderAt({ client, projectId }: Target, path: string): Promise<string> {
  let parentId: string | null = null;
  for (const name of path.split('/').filter(Boolean)) {
    const siblings = await client.folders.list(projectId, parentId === null ? {} : { parent_id: parentId });
    const found = siblings.items.find((folder) => folder.name === name && folder.parent_id === parentId);
    parentId =
      found?.id ??
      (
        await client.folders.create(projectId, {
          name,
          ...(parentId === null ? {} : { parent_id: parentId }),
        })
      ).id;
  }
  if (parentId === null) throw new UsageError('--folder must name a folder, e.g. invoices/2026');
  return parentId;
}

async function upload(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, {
    folder: { type: 'string' },
    tag: { type: 'string', multiple: true },
    metadata: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length === 0) throw new UsageError('upload needs at least one PATH');
  const metadata = jsonObject(values.metadata, '--metadata');
  const target = connect(values);
  const sizes = await Promise.all(
    positionals.map(async (path) => {
      const info = await stat(path).catch(() => undefined);
      if (!info?.isFile()) throw new UsageError(`${path} is not a file`);
      return info.size;
    }),
  );
  const folderId = values.folder === undefined ? undefined : await folderAt(target, values.folder);
  const bars: Bars = progressBars(!values.json);
  try {
    for (const [index, path] of positionals.entries()) {
      const bar = bars.add(basename(path), sizes[index]!);
      const file = await target.client.upload(target.projectId, resolve(path), {
        folderId,
        tags: values.tag,
        metadata,
        onProgress: ({ loaded }) => bar.update(loaded),
      });
      bar.done(`${file.id} ${file.status}`);
      if (values.json) print(JSON.stringify(file));
    }
  } finally {
    bars.stop();
  }
}

async function list(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, {
    q: { type: 'string' },
    status: { type: 'string' },
    category: { type: 'string' },
    tag: { type: 'string', multiple: true },
    'folder-id': { type: 'string' },
    'date-from': { type: 'string' },
    'date-to': { type: 'string' },
    'size-min': { type: 'string' },
    'size-max': { type: 'string' },
    metadata: { type: 'string' },
    limit: { type: 'string' },
    cursor: { type: 'string' },
    all: { type: 'boolean' },
    json: { type: 'boolean' },
  });
  if (positionals.length > 0) throw new UsageError(`ls takes no PATH (${positionals[0]})`);
  const query = {
    q: values.q,
    status: values.status,
    category: values.category,
    tags: values.tag,
    folder_id: values['folder-id'],
    date_from: values['date-from'],
    date_to: values['date-to'],
    size_min: number(values['size-min'], '--size-min'),
    size_max: number(values['size-max'], '--size-max'),
    metadata: jsonObject(values.metadata, '--metadata'),
    limit: number(values.limit, '--limit'),
    cursor: values.cursor,
  } as Parameters<Client['files']['list']>[1];
  const { client, projectId } = connect(values);
  let files: FileObject[];
  let more: string | null = null;
  if (values.all) {
    files = [];
    for await (const file of client.files.iterate(projectId, query)) files.push(file);
  } else {
    const page = await client.files.list(projectId, query);
    files = page.items;
    more = page.has_more ? page.next_cursor : null;
  }
  if (values.json) {
    print(JSON.stringify(values.all ? files : { items: files, next_cursor: more }, null, 2));
    return;
  }
  print(
    table(
      ['ID', 'NAME', 'STATUS', 'SIZE', 'CREATED'],
      files.map((file) => [
        file.id,
        file.filename,
        file.status,
        formatBytes(file.size_bytes),
        file.created_at,
      ]),
    ),
  );
  if (more) print(`more: --cursor ${more}`);
}

/** Counts the bytes that pass, for the progress bar. */
function counting(onBytes: (total: number) => void): Transform {
  let total = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      total += chunk.length;
      onBytes(total);
      done(null, chunk);
    },
  });
}

async function download(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, { output: { type: 'string', short: 'o' } });
  if (positionals.length !== 1) throw new UsageError('download needs one FILE_ID');
  const fileId = positionals[0]!;
  const { client, projectId } = connect(values);
  const file = await client.files.get(projectId, fileId);
  const { url } = await client.files.downloadUrl(projectId, fileId);
  const response = await fetch(url);
  if (!response.ok || !response.body) throw new Error(`the download answered ${response.status}`);
  // A name from the server never picks the folder: only its last segment is used.
  const target = values.output ?? join('.', basename(file.filename));
  // Written beside the target and renamed at the end: nothing half-written is left under its name.
  const partial = join(dirname(target), `.${basename(target)}.coffer-partial`);
  const bars = progressBars(true);
  const bar = bars.add(basename(target), file.size_bytes);
  try {
    await pipeline(
      Readable.fromWeb(response.body as never),
      counting((bytes) => bar.update(bytes)),
      createWriteStream(partial),
    );
    await rename(partial, target);
    bar.done(target);
  } catch (error) {
    await rm(partial, { force: true });
    throw error;
  } finally {
    bars.stop();
  }
}

async function remove(args: string[]): Promise<void> {
  const { values, positionals } = parse(args, {});
  if (positionals.length !== 1) throw new UsageError('rm needs one FILE_ID');
  const { client, projectId } = connect(values);
  const file = await client.files.delete(projectId, positionals[0]!);
  print(`deleted ${file.id} (${file.filename})`);
}

export const CLIENT_COMMANDS: Record<string, (args: string[]) => Promise<void>> = {
  upload,
  ls: list,
  download,
  rm: remove,
};

/** Runs a client command; answers the process's exit code. */
export async function runClientCommand(name: string, args: string[]): Promise<number> {
  try {
    await CLIENT_COMMANDS[name]!(args);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`coffer ${name}: ${error.message}\n\n${CLIENT_USAGE}\n`);
      return 2;
    }
    if (isCofferError(error)) {
      process.stderr.write(`coffer ${name}: ${error.code}: ${error.message}\n`);
      return 1;
    }
    process.stderr.write(`coffer ${name}: ${(error as Error).message}\n`);
    return 1;
  }
}
