interface BodySchema {
  $ref?: string;
  required?: string[];
}
interface Operation {
  requestBody?: { required?: boolean; content?: Record<string, { schema?: BodySchema }> };
}
interface Document {
  paths?: Record<string, Record<string, Operation | undefined> | undefined>;
  components?: { schemas?: Record<string, BodySchema> };
}

const COMPONENT = '#/components/schemas/';

/**
 * The OpenAPI document with the request body of each operation `required` only where its schema
 * requires a field: a request without a body reads as {} (see app.ts), so a body whose fields are all
 * optional may be left out. @fastify/swagger marks every body as required.
 */
export function optionalBodies<T extends object>(document: T): T {
  const { paths = {}, components } = document as Document;
  const schemas = components?.schemas ?? {};
  for (const item of Object.values(paths)) {
    for (const operation of Object.values(item ?? {})) {
      const body = operation?.requestBody;
      if (!body) continue;
      const schema = body.content?.['application/json']?.schema;
      const ref = schema?.$ref;
      const resolved = ref?.startsWith(COMPONENT) ? schemas[ref.slice(COMPONENT.length)] : schema;
      body.required = (resolved?.required?.length ?? 0) > 0;
    }
  }
  return document;
}
