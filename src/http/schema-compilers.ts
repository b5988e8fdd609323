/**
 * How route schemas become functions: request validators (Ajv) and response serializers
 * (fast-json-stringify), each compiled on its route's first use. Compiling every route's schemas as
 * the routes are registered was most of a server's start; a route's first request now pays for its own.
 */
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import fastJsonStringify from 'fast-json-stringify';
import type { FastifySchemaCompiler } from 'fastify';
import { validatedSchema } from './schemas.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Compiles every route's validators and serializers not compiled yet (see schemaCompilers). */
    compileSchemas(): void;
  }
}

type Schema = Parameters<typeof fastJsonStringify>[0];
type Validator = ReturnType<FastifySchemaCompiler<unknown>>;

/**
 * The functions of routes still to be compiled, for `compileAll`: a start does not compile them, so
 * that a test can, and a schema that does not compile fails a test instead of a route's first request.
 */
type Pending = Set<() => void>;

/** `compile()`'s function, made on the first call of the answer; until then it waits in `pending`. */
function onFirstUse<F>(compile: () => F, pending: Pending): () => F {
  let compiled: F | undefined;
  const ensure = () => {
    if (compiled === undefined) {
      compiled = compile();
      pending.delete(ensure);
    }
    return compiled;
  };
  pending.add(ensure);
  return ensure;
}

/** A validator compiled on its first call; Fastify reads `errors` from the function it was given. */
function validatorOnFirstUse(compile: () => Validator, pending: Pending): Validator {
  const compiled = onFirstUse(compile, pending);
  const validate: Validator = (data) => {
    const check = compiled();
    const valid = check(data);
    validate.errors = check.errors ?? null;
    return valid;
  };
  return validate;
}

/**
 * Fastify's validator compiler. Bodies keep their JSON types (a string "5" is not a number); query
 * strings and paths are text and are coerced. Fastify hands its shared schemas to its own Ajv only:
 * these resolve the routes' $refs themselves.
 */
function requestValidators(namedSchemas: readonly object[], pending: Pending) {
  let ajv: { body: Ajv.default; text: Ajv.default } | undefined;
  const instances = () => {
    if (ajv) return ajv;
    const options = {
      useDefaults: true,
      removeAdditional: false,
      allowUnionTypes: true,
      strict: false,
    } as const;
    const body = addFormats.default(new Ajv.default({ ...options, coerceTypes: false }));
    const text = addFormats.default(new Ajv.default({ ...options, coerceTypes: 'array' }));
    for (const schema of namedSchemas) {
      body.addSchema(validatedSchema(schema) as object);
      text.addSchema(validatedSchema(schema) as object);
    }
    ajv = { body, text };
    return ajv;
  };
  return ({ schema, httpPart }: { schema: unknown; httpPart?: string }) =>
    validatorOnFirstUse(() => {
      const { body, text } = instances();
      return (httpPart === 'body' ? body : text).compile(validatedSchema(schema) as object) as Validator;
    }, pending);
}

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
 * with a few hundred responses and dozens of named schemas, over half of a start's CPU.
 */
function responseSerializers(namedSchemas: readonly object[], pending: Pending) {
  const named = new Map(namedSchemas.map((schema) => [(schema as { $id: string }).$id, schema as Schema]));
  return ({ schema }: { schema: unknown }) => {
    const serializer = onFirstUse(() => {
      const schemas = referenced(schema, named);
      // A named schema serialised as itself is the root of its build, not one of its references.
      schemas.delete((schema as { $id?: string }).$id ?? '');
      return fastJsonStringify(schema as Schema, { schema: Object.fromEntries(schemas) });
    }, pending);
    return (data: unknown) => serializer()(data);
  };
}

/**
 * Fastify's validator and serializer compilers for routes whose schemas refer to `namedSchemas`,
 * and `compileAll`, which compiles every route's functions not compiled yet (and throws the first
 * failure).
 */
export function schemaCompilers(namedSchemas: readonly object[]) {
  const pending: Pending = new Set();
  return {
    validators: requestValidators(namedSchemas, pending),
    serializers: responseSerializers(namedSchemas, pending),
    compileAll(): void {
      for (const compile of [...pending]) compile();
    },
  };
}
