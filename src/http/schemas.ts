import { type Static, type TSchema, Type } from 'typebox';

/** `schema` or null, as one JSON Schema type list (no anyOf), so that range errors stay distinguishable from type errors. */
export function Nullable<T extends TSchema>(schema: T) {
  const { type } = schema as { type?: string };
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [type, 'null'] });
}

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.String(),
      message: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
      request_id: Type.String(),
    }),
  },
  { $id: 'Error', description: 'The error body of every failed request' },
);

export const Timestamp = Type.String({ format: 'date-time' });

/** A list of `items` with their `total`, as the management endpoints and webhooks answer. */
export function ItemList<T extends TSchema>(item: T) {
  return Type.Object({ items: Type.Array(item), total: Type.Integer() });
}

export const NoContent = Type.Unsafe<undefined>({ description: 'No content' });

/** A string limited to `values` (an `enum`, so a wrong value reads as a rule break, not a type error). */
export const StringEnum = <T extends readonly string[]>(values: T, description?: string) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], description });

export const ProjectParams = Type.Object({ project_id: Type.String() });
