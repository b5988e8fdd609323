import { Type } from 'typebox';
import { Defaulted, Timestamp } from '../../http/schemas.ts';

export const MetadataSchema = Type.Object(
  {
    schema: Type.Record(Type.String(), Type.Unknown(), {
      description: 'JSON Schema 2020-12 for file metadata',
    }),
    is_active: Type.Boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'MetadataSchema', description: "The project's metadata schema" },
);

export const SetMetadataSchemaBody = Type.Object(
  {
    schema: Type.Record(Type.String(), Type.Unknown()),
    is_active: Defaulted(Type.Boolean({ default: true })),
  },
  { $id: 'SetMetadataSchemaRequest', additionalProperties: false },
);

/** The named schemas of this module, registered once with app.addSchema. */
export const metadataSchemaSchemas = [MetadataSchema, SetMetadataSchemaBody];
