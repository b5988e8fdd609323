import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { Client, type Dispatcher } from 'undici';
import type { FuzzRequest } from './requests.ts';
import type { Schema } from './values.ts';

export interface Answer {
  status: number;
  contentType: string | null;
  text: string;
}

/**
 * Sends requests as generated, bytes, headers and path untouched: fetch would resolve a path
 * parameter of "." or ".." away (as a URL does), so the path is written out as it is.
 */
export function sender(baseUrl: string) {
  const client = new Client(baseUrl);
  const send = async (request: FuzzRequest): Promise<Answer> => {
    const response = await client.request({
      path: request.path,
      method: request.method as Dispatcher.HttpMethod,
      headers: request.headers,
      body: request.body,
      // A connection per request: the server closes one after refusing a body it did not read.
      reset: true,
    });
    const type = response.headers['content-type'];
    return {
      status: response.statusCode,
      contentType: typeof type === 'string' ? type : null,
      text: await response.body.text(),
    };
  };
  return { send, close: () => client.close() };
}

/** Checks answers against the OpenAPI document: the problems of one, none when it agrees. */
export function answerChecker(document: Schema) {
  const ajv = addFormats.default(new Ajv.default({ strict: false, allErrors: false, validateSchema: false }));
  // The whole document, so that #/components/schemas/… references resolve inside it.
  ajv.addSchema({ ...document, $id: 'openapi' });
  const validators = new Map<string, ReturnType<typeof ajv.compile>>();
  const validatorOf = (ref: string) => {
    let validate = validators.get(ref);
    if (!validate) {
      validate = ajv.compile({ $ref: `openapi${ref}` });
      validators.set(ref, validate);
    }
    return validate;
  };

  return (request: FuzzRequest, answer: Answer): string[] => {
    const responses = request.operation.spec.responses as Record<string, Schema>;
    const declared = responses[String(answer.status)];
    if (answer.status >= 500 && answer.status !== 503) return [`answered ${answer.status}`];
    if (!declared) return [`answered ${answer.status}, which the operation does not declare`];
    const schema = declared.content?.['application/json']?.schema as Schema | undefined;
    if (!schema) return answer.text === '' ? [] : ['answered a body where the document declares none'];
    if (!answer.contentType?.startsWith('application/json')) return [`answered ${answer.contentType}`];
    const body = JSON.parse(answer.text);
    const validate = validatorOf(schema.$ref);
    if (!validate(body)) return [`body does not match ${schema.$ref}: ${ajv.errorsText(validate.errors)}`];
    if (answer.status >= 400) {
      const codes = (declared.description as string).split(', ');
      if (!codes.includes(body.error.code))
        return [`${body.error.code} is not among ${answer.status}'s ${codes.join(', ')}`];
    }
    return [];
  };
}
