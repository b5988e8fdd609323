import { type CofferError, errorFromAnswer } from './errors.js';
import { type RetryPolicy, withRetries } from './retry.js';
import type { PutAnswer, PutRequest, PutTransport } from './transport.js';

/** Sends a body, again on network failures, 5xx and 429; any other answer is returned to the caller. */
export function putWithRetries(
  put: PutTransport,
  policy: RetryPolicy,
  request: PutRequest,
): Promise<PutAnswer> {
  return withRetries(policy, request.signal, async () => {
    const answer = await put(request);
    if (answer.status >= 500 || answer.status === 429) {
      throw errorFromAnswer(answer.status, answer.text, answer.requestId);
    }
    return answer;
  });
}

export const isSuccess = (answer: PutAnswer) => answer.status >= 200 && answer.status < 300;

export const putError = (answer: PutAnswer): CofferError =>
  errorFromAnswer(answer.status, answer.text, answer.requestId);
