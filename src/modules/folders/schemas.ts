import { Type } from 'typebox';
import { ItemList, Nullable, Timestamp } from '../../http/schemas.ts';
import { MAX_FILENAME_LENGTH, NAME_RULES } from '../files/rules.ts';

export const Folder = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    parent_id: Nullable(Type.String()),
    path: Type.String({ description: 'Names from the root joined by slashes, e.g. photos/2024' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Folder', description: 'A folder' },
);
export const FolderList = ItemList(Folder);

const Name = Type.String({
  minLength: 1,
  maxLength: MAX_FILENAME_LENGTH,
  description: NAME_RULES,
  examples: ['photos'],
});

export const CreateFolderBody = Type.Object(
  { name: Name, parent_id: Type.Optional(Nullable(Type.String())) },
  { $id: 'CreateFolderRequest', additionalProperties: false },
);
export const UpdateFolderBody = Type.Object(
  { name: Type.Optional(Name), parent_id: Type.Optional(Nullable(Type.String())) },
  { $id: 'UpdateFolderRequest', additionalProperties: false },
);

/** The named schemas of this module, registered once with app.addSchema. */
export const folderSchemas = [Folder, FolderList, CreateFolderBody, UpdateFolderBody];
