import fc from 'fast-check';

/** A JSON Schema, as the OpenAPI document holds it. */
export type Schema = Record<string, any>;

const COMPONENT = '#/components/schemas/';

/** The schema `schema` stands for, following $refs into the document's components. */
export function resolve(schema: Schema, components: Record<string, Schema>): Schema {
  let resolved = schema;
  while (typeof resolved?.$ref === 'string') resolved = components[resolved.$ref.slice(COMPONENT.length)]!;
  return resolved;
}

/** Strings that have broken servers: empty, huge, traversal, NUL, lone surrogates, overrides, lookalikes. */
export const ODD_STRINGS = [
  '',
  ' ',
  '\t\n',
  'a'.repeat(70_000),
  '../../../../etc/passwd',
  '..',
  '.',
  '..%2f..%2fetc',
  'C:\\Windows\\win.ini',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff\ud800',
  '\u202eexe.txt',
  '\ufeff',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  '{"$gt":""}',
  "' OR 1=1 --",
  '%00',
  '%',
  '😀'.repeat(300),
  'file_01ARZ3NDEKTSV4RRFFQ69G5FAV',
  '-1',
  '1e400',
  'NaN',
  '0x10',
];

/** How deep a deeply nested value is: far past what a recursive reader of JSON survives. */
export const NESTING_DEPTH = 5000;
export const DEEPLY_NESTED_JSON = `${'{"a":'.repeat(NESTING_DEPTH)}1${'}'.repeat(NESTING_DEPTH)}`;
// A value that toJson writes as DEEPLY_NESTED_JSON (the object itself would exhaust JSON.stringify's stack).
const DEEPLY_NESTED = '\u0001deeply nested\u0001';

/** `value` as JSON text, with its deeply nested placeholders written out. */
export const toJson = (value: unknown) =>
  (JSON.stringify(value) ?? 'null').replaceAll(JSON.stringify(DEEPLY_NESTED), DEEPLY_NESTED_JSON);

/** JSON values of every type, for a field of another type. */
export const ODD_VALUES: unknown[] = [
  DEEPLY_NESTED,
  null,
  true,
  0,
  -1,
  1.5,
  -0.0,
  1e308,
  Number.MAX_SAFE_INTEGER + 2,
  [],
  [null],
  {},
  { a: { b: { c: [] } } },
  ...ODD_STRINGS,
];

export const oddString = () =>
  fc.oneof(fc.constantFrom(...ODD_STRINGS), fc.string({ unit: 'binary', maxLength: 40 }));
export const oddValue = () => fc.oneof(fc.constantFrom(...ODD_VALUES), fc.jsonValue({ maxDepth: 3 }));

const MAX_GENERATED_LENGTH = 40;

function integer(schema: Schema): fc.Arbitrary<number> {
  const low = Math.max(schema.minimum ?? -1_000, Number.MIN_SAFE_INTEGER);
  const high = Math.min(schema.maximum ?? 1_000_000, Number.MAX_SAFE_INTEGER);
  // fc.integer stays within 32 bits: the bounds themselves, and a range just above the lower one.
  return fc.oneof(
    fc.constantFrom(low, high),
    fc.integer({ min: 0, max: Math.min(high - low, 2 ** 31 - 1) }).map((offset) => low + offset),
  );
}

function string(schema: Schema): fc.Arbitrary<string> {
  const generated = anyString(schema);
  // The document's examples are accepted by the service too, which a generated string may not be.
  if (!schema.examples?.length) return generated;
  return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...(schema.examples as string[])) }, generated);
}

function anyString(schema: Schema): fc.Arbitrary<string> {
  const minLength = schema.minLength ?? 0;
  const maxLength = Math.max(
    minLength,
    Math.min(schema.maxLength ?? MAX_GENERATED_LENGTH, MAX_GENERATED_LENGTH),
  );
  if (schema.format === 'date-time') {
    return fc
      .date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true })
      .map((date) => date.toISOString());
  }
  if (schema.format === 'uri') return fc.webPath().map((path) => `https://93.184.215.14${path}`);
  if (schema.pattern) {
    return fc
      .stringMatching(new RegExp(schema.pattern))
      .filter((text) => text.length >= minLength && text.length <= (schema.maxLength ?? Infinity));
  }
  return fc.string({ minLength, maxLength, unit: 'grapheme' });
}

/** Values `schema` accepts (as far as a schema can say; the service may still refuse some). */
export function validValue(
  schema: Schema,
  components: Record<string, Schema>,
  depth = 0,
): fc.Arbitrary<unknown> {
  const resolved = resolve(schema, components);
  if (resolved.enum) return fc.constantFrom(...(resolved.enum as unknown[]));
  if (resolved.anyOf || resolved.oneOf) {
    return fc.oneof(
      ...(resolved.anyOf ?? resolved.oneOf).map((part: Schema) => validValue(part, components, depth)),
    );
  }
  const types: (string | undefined)[] = Array.isArray(resolved.type) ? resolved.type : [resolved.type];
  return fc.oneof(...types.map((type) => ofType(type, resolved, components, depth)));
}

function ofType(
  type: string | undefined,
  schema: Schema,
  components: Record<string, Schema>,
  depth: number,
): fc.Arbitrary<unknown> {
  switch (type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return integer(schema);
    case 'number':
      return fc.oneof(
        integer(schema),
        fc.double({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e6, noNaN: true }),
      );
    case 'string':
      return string(schema);
    case 'array': {
      const item = validValue(schema.items ?? {}, components, depth + 1);
      const constraints = {
        minLength: schema.minItems ?? 0,
        maxLength: Math.max(schema.minItems ?? 0, Math.min(schema.maxItems ?? 4, 4)),
      };
      return schema.uniqueItems ? fc.uniqueArray(item, constraints) : fc.array(item, constraints);
    }
    case 'object': {
      if (depth > 4) return fc.constant({});
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      const fields = fc.record(
        Object.fromEntries(
          Object.entries(properties).map(([name, part]) => [name, validValue(part, components, depth + 1)]),
        ),
        { requiredKeys: (schema.required ?? []) as string[] },
      );
      const more = schema.additionalProperties;
      if (!more) return fields;
      const value = validValue(more === true ? {} : more, components, depth + 1);
      const extra = fc.dictionary(fc.string({ minLength: 1, maxLength: 10 }), value, { maxKeys: 3 });
      return fc.tuple(extra, fields).map(([more, known]) => ({ ...more, ...known }));
    }
    default:
      // Any JSON is valid here, however deep.
      return fc.oneof({ weight: 5, arbitrary: fc.jsonValue({ maxDepth: 2 }) }, fc.constant(DEEPLY_NESTED));
  }
}

/** `value` broken in one place: a field dropped, added or of another type, or the whole of another type. */
export function mutated(value: unknown): fc.Arbitrary<unknown> {
  const whole = oddValue();
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return whole;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const changes: fc.Arbitrary<unknown>[] = [
    whole,
    fc
      .tuple(fc.string({ minLength: 1, maxLength: 12 }), oddValue())
      .map(([key, extra]) => ({ ...record, [key]: extra })),
  ];
  if (keys.length > 0) {
    const key = fc.constantFrom(...keys);
    changes.push(
      key.map((dropped) => Object.fromEntries(Object.entries(record).filter(([name]) => name !== dropped))),
      fc.tuple(key, oddValue()).map(([name, odd]) => ({ ...record, [name]: odd })),
    );
  }
  return fc.oneof(...changes);
}
