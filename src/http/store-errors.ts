import type { StoreError, StoreErrorCode } from '../infra/storage/object-store.ts';
import { AppError } from './errors.ts';

/** The contract's status and code for each failure of the object store. */
const ANSWERS: Record<StoreErrorCode, [status: number, code: string]> = {
  NoSuchKey: [404, 'NOT_FOUND'],
  NoSuchUpload: [404, 'NOT_FOUND'],
  AlreadyExists: [409, 'CONFLICT'],
  TooLarge: [413, 'REQUEST_TOO_LARGE'],
  InvalidPart: [422, 'VALIDATION_ERROR'],
  InvalidArgument: [400, 'BAD_REQUEST'],
  Forbidden: [403, 'FORBIDDEN'],
  InvalidRange: [416, 'RANGE_NOT_SATISFIABLE'],
  Unavailable: [503, 'STORE_UNAVAILABLE'],
};

/**
 * The API's answer to a StoreError, with its message and details; an unavailable store says nothing
 * of why (the cause, which may name the store, is logged with the error instead).
 */
export function fromStoreError(error: StoreError): AppError {
  const [status, code] = ANSWERS[error.code];
  if (error.code === 'Unavailable') {
    return new AppError(status, code, 'The object store is unavailable: try again');
  }
  return new AppError(status, code, error.message, error.details);
}
