import fc from 'fast-check';
import {
  DEEPLY_NESTED_JSON,
  mutated,
  oddString,
  resolve,
  type Schema,
  toJson,
  validValue,
} from './values.ts';

export interface Operation {
  method: string;
  /** The path template, e.g. /v1/projects/{project_id}/files. */
  path: string;
  spec: Schema;
}

/** One generated request, ready for fetch, and what it was made of (for a failure's message). */
export interface FuzzRequest {
  operation: Operation;
  method: string;
  /** The path and query string, as sent. */
  path: string;
  url: string;
  headers: Record<string, string>;
  body?: Uint8Array;
  /** How the request was broken: 'valid' when it was not. */
  mutation: string;
}

/** What the requests are made of: the credentials, and ids of real records by path parameter name. */
export interface Fixtures {
  adminKey: string;
  apiKey: string;
  uploadToken: string;
  otherProjectKey: string;
  ids: Record<string, string[]>;
}

/** The request in one line: method, URL, how it was broken, the start of its body. */
export function describeRequest(request: FuzzRequest): string {
  const body = request.body ? ` ${new TextDecoder().decode(request.body.slice(0, 300))}` : '';
  return `${request.method} ${request.url.slice(0, 300)} [${request.mutation}] ${JSON.stringify(request.headers).slice(0, 200)}${body}`;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

export function operationsOf(document: Schema): Operation[] {
  return Object.entries(document.paths as Record<string, Schema>).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method]).map((method) => ({ method, path, spec: item[method] })),
  );
}

const adminOnly = (operation: Operation) =>
  /Requires: the admin key\./.test(operation.spec.description ?? '');
const isPublic = (operation: Operation) => !operation.spec.security;

function credential(operation: Operation, fixtures: Fixtures): fc.Arbitrary<[string | undefined, string]> {
  const own = adminOnly(operation) ? fixtures.adminKey : fixtures.apiKey;
  return fc.oneof(
    { weight: 12, arbitrary: fc.constant<[string | undefined, string]>([`Bearer ${own}`, 'valid']) },
    {
      weight: 3,
      arbitrary: fc.constantFrom<[string | undefined, string]>(
        [undefined, 'no credential'],
        ['Bearer', 'empty bearer'],
        [`Basic ${Buffer.from('a:b').toString('base64')}`, 'basic credentials'],
        ['Bearer coffer_live_wrong', 'unknown API key'],
        [`Bearer coffer_admin_${'x'.repeat(43)}`, 'wrong admin key'],
        ['Bearer coffer_upload_token_nope', 'unknown upload token'],
        [`Bearer ${fixtures.uploadToken}`, 'upload token'],
        [`Bearer ${fixtures.otherProjectKey}`, "another project's key"],
        [`Bearer ${fixtures.adminKey}`, 'admin key'],
        [`Bearer ${fixtures.apiKey}`, 'API key'],
        [`Bearer ${'a'.repeat(600)}`, 'huge token'],
        [`bearer  ${own}`, 'lowercase scheme, two spaces'],
      ),
    },
  );
}

/** A path parameter: mostly a real id of its kind, else one of another record, or junk. */
function pathValue(name: string, fixtures: Fixtures): fc.Arbitrary<[string, boolean]> {
  const real = fixtures.ids[name] ?? [];
  const others = Object.values(fixtures.ids).flat();
  const odd = oddString().filter((text) => text.length > 0);
  return fc.oneof(
    ...(real.length
      ? [{ weight: 20, arbitrary: fc.constantFrom(...real).map((id): [string, boolean] => [id, true]) }]
      : []),
    { weight: 1, arbitrary: fc.constantFrom(...others).map((id): [string, boolean] => [id, false]) },
    { weight: 2, arbitrary: odd.map((text): [string, boolean] => [text, false]) },
  );
}

/** Percent-encoded; a lone surrogate, which has no UTF-8, as the bytes it would have in CESU-8 (invalid UTF-8). */
const encodeText = (value: string) =>
  value.isWellFormed()
    ? encodeURIComponent(value)
    : encodeURIComponent(value.toWellFormed()).replaceAll('%EF%BF%BD', '%ED%A0%80');
const encode = (value: unknown) =>
  encodeText(typeof value === 'string' ? value : (JSON.stringify(value) ?? ''));

/** The query string: valid values of the parameters, or one of them broken, or raw junk. */
function query(operation: Operation, components: Record<string, Schema>): fc.Arbitrary<[string, string]> {
  const parameters = ((operation.spec.parameters ?? []) as Schema[]).filter((item) => item.in === 'query');
  const valid = fc
    .tuple(
      ...parameters.map((parameter) => {
        const value = validValue(parameter.schema, components).map(
          (v) => [parameter.name as string, v] as const,
        );
        return parameter.required ? value : fc.option(value, { nil: undefined });
      }),
    )
    .map((pairs) =>
      pairs
        .filter((pair) => pair !== undefined)
        .flatMap(([name, value]) =>
          (Array.isArray(value) ? value : [value]).map((item) => `${name}=${encode(item)}`),
        ),
    );
  const names = parameters.map((parameter) => parameter.name as string);
  const broken = fc.tuple(
    valid,
    names.length ? fc.constantFrom(...names, 'unknown_parameter') : fc.constant('unknown_parameter'),
    oddString(),
  );
  const raw = fc.constantFrom(
    '%',
    '%zz',
    '%E0%A4%A',
    '%C0%AF',
    'a=%FF%FE',
    'limit=1&limit=2',
    '&&&==',
    'x[y][z]=1',
  );
  return fc.oneof(
    { weight: 6, arbitrary: valid.map((pairs): [string, string] => [pairs.join('&'), 'valid']) },
    {
      weight: 3,
      arbitrary: broken.map(([pairs, name, value]): [string, string] => [
        [...pairs, `${name}=${encode(value)}`].join('&'),
        `query ${name} broken`,
      ]),
    },
    { weight: 1, arbitrary: raw.map((text): [string, string] => [text, `raw query ${text}`]) },
  );
}

const text = (value: string) => new TextEncoder().encode(value);

/** The body: valid JSON of its schema, or mutated, or not JSON at all, sent with one content type or another. */
function body(
  operation: Operation,
  components: Record<string, Schema>,
): fc.Arbitrary<{ body?: Uint8Array; type?: string; mutation: string }> {
  const schema = operation.spec.requestBody?.content?.['application/json']?.schema as Schema | undefined;
  if (!schema) {
    // Routes without a body are sent none, or a stray one (fetch sends none with a GET).
    if (operation.method === 'get') return fc.constant({ mutation: 'valid' });
    return fc.oneof(
      { weight: 8, arbitrary: fc.constant({ mutation: 'valid' }) },
      {
        weight: 1,
        arbitrary: fc.constant({
          body: text('{"stray":true}'),
          type: 'application/json',
          mutation: 'stray body',
        }),
      },
    );
  }
  const valid = validValue(resolve(schema, components), components);
  const json = (value: unknown, mutation: string) => ({
    body: text(toJson(value)),
    type: 'application/json',
    mutation,
  });
  const notJson = fc.constantFrom(
    { body: text('{"a":'), type: 'application/json', mutation: 'truncated JSON' },
    { body: text(''), type: 'application/json', mutation: 'empty JSON body' },
    {
      body: new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
      type: 'application/json',
      mutation: 'invalid UTF-8',
    },
    { body: text('{"name":"x"}'), type: 'text/plain', mutation: 'text/plain' },
    { body: text('name=x'), type: 'application/x-www-form-urlencoded', mutation: 'form body' },
    { body: text('{"name":"x"}'), type: 'application/json; charset=iso-8859-1', mutation: 'latin-1 JSON' },
    { body: text('{"name":"x"}'), type: undefined, mutation: 'no content type' },
    { body: text(`${'['.repeat(64)}${']'.repeat(64)}`), type: 'application/json', mutation: 'nested arrays' },
    {
      body: text(DEEPLY_NESTED_JSON),
      type: 'application/json',
      mutation: 'deeply nested',
    },
    { body: text(`{"pad":"${'a'.repeat(1_100_000)}"}`), type: 'application/json', mutation: 'over 1 MB' },
    { body: text('{"a":1,"a":2}'), type: 'application/json', mutation: 'duplicate keys' },
    {
      body: text('{"constructor":{"prototype":{"x":1}}}'),
      type: 'application/json',
      mutation: 'constructor key',
    },
  );
  return fc.oneof(
    { weight: 6, arbitrary: valid.map((value) => json(value, 'valid')) },
    {
      weight: 4,
      arbitrary: valid.chain((value) => mutated(value)).map((value) => json(value, 'body mutated')),
    },
    { weight: 1, arbitrary: fc.constant({ mutation: 'no body' }) },
    { weight: 2, arbitrary: notJson },
  );
}

/** Requests to `operation`, mostly well-formed, the rest broken in one way or several. */
export function requestTo(
  operation: Operation,
  components: Record<string, Schema>,
  fixtures: Fixtures,
  baseUrl: string,
): fc.Arbitrary<FuzzRequest> {
  const names = [...operation.path.matchAll(/\{(\w+)\}/g)].map((match) => match[1]!);
  const params = fc.tuple(...names.map((name) => pathValue(name, fixtures)));
  return fc
    .tuple(params, query(operation, components), body(operation, components), credential(operation, fixtures))
    .map(([values, [search, queryMutation], payload, [authorization, credentialMutation]]) => {
      let path = operation.path;
      names.forEach((name, index) => {
        path = path.replace(`{${name}}`, encodeText(values[index]![0]));
      });
      const headers: Record<string, string> = {};
      if (authorization !== undefined && !isPublic(operation)) headers.authorization = authorization;
      if (payload.type) headers['content-type'] = payload.type;
      const mutation = [
        ...names.filter((_, index) => !values[index]![1]).map((name) => `path ${name} not its record`),
        queryMutation,
        payload.mutation,
        credentialMutation,
      ].filter((part) => part !== 'valid');
      const request: FuzzRequest = {
        operation,
        method: operation.method.toUpperCase(),
        path: `${path}${search ? `?${search}` : ''}`,
        url: `${baseUrl}${path}${search ? `?${search}` : ''}`,
        headers,
        body: payload.body,
        mutation: mutation.join('; ') || 'valid',
      };
      // A counterexample is printed as the request, not as the operation's whole description.
      return Object.assign(request, { [fc.toStringMethod]: () => describeRequest(request) });
    });
}
