import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SCHEMA_FILE } from '../../packages/client/scripts/generate.ts';
import { renderTypes } from '../../packages/client/scripts/openapi-types.ts';
import { startCoffer, type TestCoffer } from '../support/coffer.ts';

let coffer: TestCoffer;
beforeAll(async () => {
  coffer = await startCoffer();
});
afterAll(async () => coffer?.close());

it("keeps packages/client/src/schema.d.ts equal to the types of the server's OpenAPI document", async () => {
  const document = (await (await fetch(`${coffer.url}/openapi.json`)).json()) as object;
  const expected = await renderTypes(document);
  // On a mismatch: npm run generate -w @coffer/client
  expect(readFileSync(SCHEMA_FILE, 'utf8')).toBe(expected);
});
