/** Reading one file, quarantined ones included. */
import { type Client, type FileObject, isCofferError } from '@coffer/client';

/**
 * The file of `fileId`. A quarantined file answers 409 CONFLICT to every request but DELETE: it
 * is then found among the project's quarantined files (newest first), as the list shows it, with
 * its reason.
 */
export async function fileById(client: Client, projectId: string, fileId: string): Promise<FileObject> {
  try {
    return await client.files.get(projectId, fileId);
  } catch (error) {
    if (!isCofferError(error, 'CONFLICT')) throw error;
    for await (const file of client.files.iterate(projectId, { status: 'quarantined', limit: 200 }))
      if (file.id === fileId) return file;
    throw error;
  }
}
