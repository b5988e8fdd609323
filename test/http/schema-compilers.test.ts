import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schemaCompilers } from '../../src/http/schema-compilers.ts';
import { startCoffer, type TestCoffer } from '../support/coffer.ts';

const Owner = { $id: 'Owner', type: 'object', properties: { name: { type: 'string' } } };
const Item = {
  $id: 'Item',
  type: 'object',
  properties: { id: { type: 'string' }, owner: { $ref: 'Owner' }, parent: { $ref: 'Item' } },
};
const Unused = { $id: 'Unused', type: 'object', properties: { broken: { $ref: 'Missing' } } };

describe('response serializers', () => {
  const compile = schemaCompilers([Owner, Item, Unused]).serializers;

  it('resolves the named schemas a response refers to, and those they refer to', () => {
    const serialize = compile({ schema: { type: 'array', items: { $ref: 'Item' } } });
    const item = { id: 'a', owner: { name: 'Ann', secret: 'x' }, parent: { id: 'b', extra: 1 } };
    expect(JSON.parse(serialize([item]))).toEqual([{ id: 'a', owner: { name: 'Ann' }, parent: { id: 'b' } }]);
  });

  it('serialises a named schema as itself, and leaves out the schemas it does not refer to', () => {
    // Unused refers to a schema that does not exist: building it would throw.
    const serialize = compile({ schema: Item });
    expect(JSON.parse(serialize({ id: 'a', hidden: true }))).toEqual({ id: 'a' });
  });
});

describe('request validators', () => {
  const compile = schemaCompilers([Owner]).validators;

  it('checks a body as JSON, and says what failed through the function Fastify was given', () => {
    const validate = compile({
      schema: { type: 'object', properties: { owner: { $ref: 'Owner' }, size: { type: 'integer' } } },
      httpPart: 'body',
    });
    expect(validate({ owner: { name: 'Ann' }, size: 5 })).toBe(true);
    expect(validate({ owner: { name: 5 } })).toBe(false);
    expect(validate.errors).toMatchObject([{ instancePath: '/owner/name' }]);
    expect(validate({ size: '5' })).toBe(false);
    expect(validate({ size: 5 })).toBe(true);
    expect(validate.errors).toBeNull();
  });

  it('coerces query strings and path parameters, which are text', () => {
    const validate = compile({
      schema: { type: 'object', properties: { limit: { type: 'integer' } } },
      httpPart: 'querystring',
    });
    const query = { limit: '20' };
    expect(validate(query)).toBe(true);
    expect(query.limit).toBe(20);
  });
});

describe('compiling on first use', () => {
  it('compiles nothing until asked, then every function still pending, and says what does not compile', () => {
    const compilers = schemaCompilers([Owner, Item, Unused]);
    const serialize = compilers.serializers({ schema: { $ref: 'Item' } });
    const broken = compilers.serializers({ schema: { $ref: 'Unused' } });
    compilers.validators({
      schema: { type: 'object', properties: { n: { type: 'integer' } } },
      httpPart: 'body',
    });
    expect(JSON.parse(serialize({ id: 'a' }))).toEqual({ id: 'a' });
    // Unused refers to a schema that does not exist: made a route's function, it fails only when compiled.
    expect(() => compilers.compileAll()).toThrow(/Missing/);
    expect(() => broken({})).toThrow(/Missing/);
  });

  describe("Coffer's routes", () => {
    let coffer: TestCoffer;
    beforeAll(async () => {
      coffer = await startCoffer();
    });
    afterAll(() => coffer.close());

    it('all compile: every validator and serializer of every route', () => {
      expect(() => coffer.app.compileSchemas()).not.toThrow();
    });
  });
});
