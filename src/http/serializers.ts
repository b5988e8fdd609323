import fastJsonStringify from 'fast-json-stringify';

type Schema = Parameters<typeof fastJsonStringify>[0];

/** The `$id` a `$ref` names ('Project' or 'Project#/properties/x'); a local '#/…' pointer names none. */
const refId = (ref: unknown) => (typeof ref === 'string' ? ref.split('#')[0] || undefined : undefined);

/** The named schemas `schema` refers to, with those they refer to in turn. */
function referenced(schema: unknown, named: ReadonlyMap<string, Schema>, found = new Map<string, Schema>()) {
  if (typeof schema !== 'object' || schema === null) return found;
  const id = refId((schema as { $ref?: unknown }).$ref);
  const target = id === undefined ? undefined : named.get(id);
  if (id !== undefined && target !== undefined && !found.has(id)) {
    found.set(id, target);
    referenced(target, named, found);
  }
  for (const value of Object.values(schema)) referenced(value, named, found);
  return found;
}

/**
 * Fastify's serializer compiler, given only the named schemas a response refers to. Fastify's own
 * hands every shared schema to every response's build, which checks and indexes each of them anew:
 * with a few hundred responses and dozens of named schemas that was over half of the start-up's CPU.
 */
export function responseSerializers(namedSchemas: readonly object[]) {
  const named = new Map(namedSchemas.map((schema) => [(schema as { $id: string }).$id, schema as Schema]));
  return ({ schema }: { schema: unknown }) => {
    const schemas = referenced(schema, named);
    // A named schema serialised as itself is the root of its build, not one of its references.
    schemas.delete((schema as { $id?: string }).$id ?? '');
    return fastJsonStringify(schema as Schema, { schema: Object.fromEntries(schemas) });
  };
}
