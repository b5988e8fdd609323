import type { Services } from '../../services.ts';
import { bucketOperations } from './bucket-operations.ts';
import type { Operation } from './call.ts';
import { multipartOperations } from './multipart-operations.ts';
import { objectOperations } from './object-operations.ts';

/**
 * Every operation the endpoint serves, by `METHOD target[?subresource]` (see operationOf in
 * routes.ts); any other answers 501 NotImplemented.
 */
export function s3Operations(services: Services, region: string): Record<string, Operation> {
  return {
    ...bucketOperations(services, region),
    ...objectOperations(services),
    ...multipartOperations(services),
  };
}
