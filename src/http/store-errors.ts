import {
  badRequest,
  conflict,
  type DomainError,
  forbidden,
  invalidRange,
  objectNotFound,
  objectTooLarge,
  storageFull,
  storeUnavailable,
  validationError,
} from '../domain/errors.ts';
import type { StoreError, StoreErrorCode } from '../infra/storage/object-store.ts';

/**
 * The contract's answer to each failure of the object store, with the store's message and details;
 * an unavailable or full store says nothing of why (the cause, which may name a path, is logged instead).
 */
const ANSWERS: Record<StoreErrorCode, (message: string, details?: Record<string, unknown>) => DomainError> = {
  NoSuchKey: objectNotFound,
  NoSuchUpload: objectNotFound,
  AlreadyExists: conflict,
  TooLarge: objectTooLarge,
  InvalidPart: validationError,
  InvalidArgument: badRequest,
  Forbidden: forbidden,
  InvalidRange: invalidRange,
  InsufficientStorage: storageFull,
  Unavailable: storeUnavailable,
};

export const fromStoreError = (error: StoreError): DomainError =>
  ANSWERS[error.code](error.message, error.details);
