import openapiTS, { astToString, COMMENT_HEADER, type OpenAPI3 } from 'openapi-typescript';

/**
 * The TypeScript declarations of an OpenAPI document, exactly as `src/schema.d.ts` holds them. One
 * function for the generator and the drift test, so that both render the same options.
 */
export async function renderTypes(document: object): Promise<string> {
  // A copy: openapi-typescript annotates the objects it walks.
  const nodes = await openapiTS(structuredClone(document) as OpenAPI3);
  return `${COMMENT_HEADER.trimEnd()}\n// Regenerate with \`npm run generate -w @coffer/client\`; test/client/schema.test.ts checks it.\n\n${astToString(nodes)}`;
}
