import { type Static, type TSchema, Type } from 'typebox';
import { ISO_8601_PATTERN } from '../domain/dates.ts';
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

/**
 * A field that may be left out (not `required` in the document) and that validation then fills in with
 * its `default`: the handler always sees it.
 */
export const Defaulted = <T extends TSchema>(schema: T) => Type.Optional(schema) as unknown as T;

/** The extension marking a part of a schema whose rules the service checks itself. */
const SERVICE_CHECKED = 'x-checked-by-service';

/**
 * `schema` as the OpenAPI document shows it, with all its rules, of which the request validator checks
 * only the type: the service checks the rest, to answer a broken rule with its own code (invalid_url),
 * status (an unreadable date is 400) or details (the unknown event), or to ignore the value where it
 * does not apply.
 */
export const ServiceChecked = <T extends TSchema>(schema: T) =>
  Type.Unsafe<Static<T>>({ ...schema, [SERVICE_CHECKED]: true });

/** A copy of `schema` as the request validator checks it: each ServiceChecked part reduced to its type. */
export function validatedSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(validatedSchema);
  if (typeof schema !== 'object' || schema === null) return schema;
  const node = schema as Record<string, unknown>;
  if (node[SERVICE_CHECKED] === true) return { type: node.type };
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, validatedSchema(value)]));
}

/** A list of named `items` with their `total`, as the management endpoints and webhooks answer; named `<item>List`. */
export function ItemList<T extends TSchema>(item: T) {
  return Type.Object({ items: Type.Array(Ref(item)), total: Type.Integer() }, { $id: `${nameOf(item)}List` });
}

// `type: null` makes the OpenAPI document show no content, so that a generated client reads no body.
export const NoContent = Type.Unsafe<undefined>({ type: 'null', description: 'No content' });

/** A query's ISO 8601 date or timestamp, read by parseDate (400 when it is not one). */
export const IsoDate = (description: string) =>
  ServiceChecked(
    Type.String({
      pattern: ISO_8601_PATTERN,
      description: `${description}. An ISO 8601 date (its whole day for an upper bound) or timestamp, UTC without an offset`,
    }),
  );

export const ProjectParams = Type.Object({ project_id: Type.String() });
