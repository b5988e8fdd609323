import { type DomainError, imageTooLarge, notAnImage } from '../domain/errors.ts';
import type { ImageError } from '../infra/images/errors.ts';
import { HttpError } from './errors.ts';

/** A full render queue clears within moments: try again after this. */
const BUSY_RETRY_SECONDS = 1;

/** The contract's answer to each failure of image rendering, with its message and details. */
export function fromImageError(error: ImageError): DomainError {
  switch (error.code) {
    case 'NotAnImage':
      return notAnImage(error.message, error.details);
    case 'TooLarge':
      return imageTooLarge(error.message, error.details);
    case 'Busy':
      return new HttpError(
        503,
        'RENDER_BUSY',
        error.message,
        { ...error.details, retry_after_seconds: BUSY_RETRY_SECONDS },
        { 'retry-after': String(BUSY_RETRY_SECONDS) },
      );
  }
}
