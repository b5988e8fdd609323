export type ImageErrorCode =
  /** The bytes are not a raster image the server decodes (SVG, a document, a truncated file). */
  | 'NotAnImage'
  /** The source exceeds the pixel or byte bound, or its render ran past the deadline. */
  | 'TooLarge'
  /** Every render slot is taken and the queue is full. */
  | 'Busy';

/** What image rendering throws; mapped to the API's errors at the HTTP boundary. */
export class ImageError extends Error {
  readonly code: ImageErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(
    code: ImageErrorCode,
    message: string,
    details?: Record<string, unknown>,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ImageError';
    this.code = code;
    this.details = details;
  }
}
