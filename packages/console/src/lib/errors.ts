/** Failures in words: the API's own message, or what to do when no answer came. */
import { isCofferError } from '@coffer/client';

export function describe(error: unknown): string {
  if (isCofferError(error)) {
    if (error.code === 'NETWORK_ERROR')
      return 'Coffer did not answer. Check that the server is running and reachable, then try again.';
    if (error.code === 'ABORTED') return 'Cancelled.';
    if (error.code === 'RATE_LIMITED') return `${error.message} Wait a moment and try again.`;
    return error.message;
  }
  return error instanceof Error ? error.message : String(error);
}

/** The request field a validation error names (`details.field`), e.g. `settings.max_file_size_bytes`. */
export function fieldOf(error: unknown): string | undefined {
  if (!isCofferError(error)) return undefined;
  const field = error.details?.field;
  return typeof field === 'string' ? field : undefined;
}

/** The JSON Schema errors of a metadata write refused by the project's schema, one line each. */
export function schemaErrors(error: unknown): string[] {
  if (!isCofferError(error)) return [];
  const errors = error.details?.errors;
  if (!Array.isArray(errors)) return [];
  return errors.map((entry: { path?: unknown; message?: unknown }) => {
    const path = typeof entry.path === 'string' ? entry.path : '/';
    return `${path}: ${typeof entry.message === 'string' ? entry.message : 'is not valid'}`;
  });
}

export const isUnauthenticated = (error: unknown) =>
  isCofferError(error) && (error.code === 'UNAUTHENTICATED' || error.status === 401);
