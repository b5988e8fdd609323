import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/lib/ids.ts';
import * as files from '../../src/modules/files/repo.ts';
import { FILE_STATUSES, type FileStatus } from '../../src/modules/files/rules.ts';
import { FILE_TARGETS, FILE_TRANSITIONS, IllegalTransitionError } from '../../src/modules/files/states.ts';
import { startCoffer, type TestCoffer, type TestProject } from '../support/coffer.ts';

let coffer: TestCoffer;
let project: TestProject;
beforeAll(async () => {
  coffer = await startCoffer();
  project = await coffer.newProject();
});
afterAll(() => coffer.close());

async function fileIn(status: FileStatus): Promise<files.FileRow> {
  const id = newId('file');
  return files.insertFile(coffer.services.db, {
    id,
    project_id: project.id,
    folder_id: null,
    status,
    filename: 'state.txt',
    content_type: 'text/plain',
    size_bytes: 1,
    category: 'document',
    storage_key: `${project.id}/${id}/k`,
    metadata: {},
    tags: [],
    owner_user_id: null,
    owner_org_id: null,
    upload_token_id: null,
    upload_expires_at: null,
  });
}

const move = (file: files.FileRow, from: FileStatus, to: (typeof FILE_TARGETS)[number]) =>
  files.transitionFile(coffer.services.db, project.id, file.id, from, to);

describe("the file's states", () => {
  const pairs = FILE_STATUSES.flatMap((from) => FILE_TARGETS.map((to) => [from, to] as const));
  const allowed = pairs.filter(([from, to]) => FILE_TRANSITIONS[from].includes(to));

  it('lists the life the spec states, and nothing else', () => {
    expect(allowed.map(([from, to]) => `${from}→${to}`).sort()).toEqual(
      [
        'uploading→processing',
        'uploading→ready',
        'uploading→failed',
        'uploading→deleted',
        'processing→ready',
        'processing→failed',
        'processing→quarantined',
        'processing→deleted',
        'ready→deleted',
        'failed→processing',
        'failed→deleted',
        'quarantined→deleted',
      ].sort(),
    );
  });

  it.each(allowed)('takes %s → %s, once', async (from, to) => {
    const file = await fileIn(from);
    const moved = await move(file, from, to);
    expect(moved).toBeDefined();
    if (to === 'deleted') expect(moved).toMatchObject({ status: from, deleted_at: expect.any(Date) });
    else expect(moved).toMatchObject({ status: to, deleted_at: null });
    // The same transition again finds the file moved on: a racing second writer changes nothing.
    expect(await move(file, from, to)).toBeUndefined();
  });

  it.each(pairs.filter((pair) => !allowed.includes(pair)))('refuses %s → %s', async (from, to) => {
    const file = await fileIn(from);
    await expect(move(file, from, to)).rejects.toBeInstanceOf(IllegalTransitionError);
    expect(await files.findFile(coffer.services.db, project.id, file.id)).toMatchObject({
      status: from,
      deleted_at: null,
    });
  });

  it('moves a file only from the state it is in, and never a deleted one', async () => {
    const file = await fileIn('uploading');
    // Whoever read it as processing lost a race: the guarded update skips no state.
    expect(await move(file, 'processing', 'ready')).toBeUndefined();
    expect(await move(file, 'uploading', 'deleted')).toBeDefined();
    expect(await move(file, 'uploading', 'processing')).toBeUndefined();
    expect(await files.findFile(coffer.services.db, project.id, file.id)).toMatchObject({
      status: 'uploading',
    });
  });
});
