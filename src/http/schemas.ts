import { type Static, type TSchema, Type } from 'typebox';
import { ERROR_CODES } from '../domain/errors.ts';

/** `schema` or null, as one JSON Schema type list (no anyOf), so that range errors stay distinguishable from type errors. */
export function Nullable<T extends TSchema>(schema: T) {
  const { type } = schema as { type?: string };
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [type, 'null'] });
}

/** A string limited to `values` (an `enum`, so a wrong value reads as a rule break, not a type error). */
export const StringEnum = <T extends readonly string[]>(values: T, description?: string) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], description });

/** The name a schema was given with `$id`; each named schema is one component of the OpenAPI document. */
function nameOf(schema: TSchema): string {
  const { $id } = schema as { $id?: string };
  if (!$id) throw new Error('Only a schema with an $id (registered with app.addSchema) can be referenced');
  return $id;
}

/**
 * A reference to a named schema, typed as that schema: the OpenAPI document then shows the component
 * once instead of a copy in every operation, and a generated client gets one type for it.
 */
export const Ref = <T extends TSchema>(schema: T) => Type.Unsafe<Static<T>>({ $ref: nameOf(schema) });

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: StringEnum(ERROR_CODES, 'One of the error catalogue; new codes may be added'),
      message: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
      request_id: Type.String(),
    }),
  },
  { $id: 'Error', description: 'The error body of every failed request' },
);

export const Timestamp = Type.String({ format: 'date-time' });

/** A list of named `items` with their `total`, as the management endpoints and webhooks answer; named `<item>List`. */
export function ItemList<T extends TSchema>(item: T) {
  return Type.Object({ items: Type.Array(Ref(item)), total: Type.Integer() }, { $id: `${nameOf(item)}List` });
}

// `type: null` makes the OpenAPI document show no content, so that a generated client reads no body.
export const NoContent = Type.Unsafe<undefined>({ type: 'null', description: 'No content' });

export const ProjectParams = Type.Object({ project_id: Type.String() });
