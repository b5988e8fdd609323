import { describe, expect, it } from 'vitest';
import { requestValidators, responseSerializers } from '../../src/http/schema-compilers.ts';

const Owner = { $id: 'Owner', type: 'object', properties: { name: { type: 'string' } } };
const Item = {
  $id: 'Item',
  type: 'object',
  properties: { id: { type: 'string' }, owner: { $ref: 'Owner' }, parent: { $ref: 'Item' } },
};
const Unused = { $id: 'Unused', type: 'object', properties: { broken: { $ref: 'Missing' } } };

describe('response serializers', () => {
  const compile = responseSerializers([Owner, Item, Unused]);

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
  const compile = requestValidators([Owner]);

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
