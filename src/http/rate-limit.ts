import rateLimit, { normalizeIP } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { LRUCache } from 'lru-cache';
import type { RateLimitConfig } from '../config.ts';
import { DomainError } from '../domain/errors.ts';
import type { Principal } from '../domain/principal.ts';
import type { Cache } from '../infra/cache.ts';
import type { Project } from '../modules/projects/schemas.ts';
import { httpStatus, rateLimited } from './errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Which limit counts the route's requests: 'objects' (presigned object URLs, per client IP) or
     * 'none' (health probes); the API's limits when absent.
     */
    limitGroup?: 'objects' | 'none';
  }
}

/** Every limit counts requests in fixed windows of one minute. */
const WINDOW_MS = 60_000;
/** Counters one process keeps without Redis; the least recently used are dropped past it. */
const LOCAL_COUNTERS = 20_000;
/** Addresses remembered as refused for failing authentication, oldest dropped past it. */
const REMEMBERED_ADDRESSES = 10_000;

/** Whose limit a request counts against, as the 429 body's `details.limit_source` names it. */
type LimitSource =
  | 'api_key'
  | 'project'
  | 'upload_token'
  | 's3_credential'
  | 'client_ip'
  | 'failed_auth'
  | 'object_urls';

const DESCRIPTIONS: Record<LimitSource, string> = {
  api_key: 'for this API key',
  project: "for this API key (the project's limit)",
  upload_token: 'for this upload token',
  s3_credential: 'for this S3 credential',
  client_ip: 'without a credential from this address',
  failed_auth: 'that failed authentication from this address',
  object_urls: 'to object URLs from this address',
};

interface Counter {
  source: LimitSource;
  key: string;
  max: number;
}

// The counter a request is being charged to: the limiter's key and max are read from the request.
const COUNTER = Symbol('coffer.rateLimitCounter');
type Counted = FastifyRequest & { [COUNTER]: Counter };

export interface RateLimits {
  /**
   * onRequest, before authentication: health probes pass, object URLs and credential-less requests
   * are counted per client IP, and an address past its failed-authentication limit is refused before
   * its credential is looked at (so that guessing learns nothing more).
   */
  beforeAuth: onRequestHookHandler;
  /** onRequest, after authentication: the caller's own limit (API key or upload token). */
  afterAuth: onRequestHookHandler;
  /** The same charge, for an edge that authenticates in its handler (the S3 endpoint). */
  chargeCaller(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** For such an edge: the refusal of an address past its failed-authentication limit, if it is. */
  refuseGuesser(request: FastifyRequest): DomainError | undefined;
  /** For such an edge: counts a failed authentication against the client address. */
  countAuthFailure(request: FastifyRequest): Promise<void>;
}

/** An IPv6 client holds a whole /64: its addresses share one counter. */
const clientAddress = (request: FastifyRequest) => normalizeIP(request.ip ?? 'unknown');

/**
 * Rate limits on @fastify/rate-limit: counters in Redis when the cache has it (shared by every API
 * node), in process memory otherwise. A counter that cannot be reached lets the request through: a
 * Redis outage should not stop uploads, and /health/ready reports it.
 */
export async function createRateLimits(
  app: FastifyInstance,
  limits: RateLimitConfig,
  cache: Cache,
): Promise<RateLimits> {
  await app.register(rateLimit, {
    global: false,
    timeWindow: WINDOW_MS,
    keyGenerator: (request) => (request as Counted)[COUNTER].key,
    max: (request) => (request as Counted)[COUNTER].max,
    cache: LOCAL_COUNTERS,
    ...(cache.redis ? { redis: cache.redis, nameSpace: 'rate-limit:' } : {}),
  });
  app.decorateRequest(COUNTER, null);
  const limiter = app.createRateLimit();

  let lastWarning = 0;
  /** Counts one request; undefined when the counter could not be reached (fail open). */
  async function count(request: FastifyRequest, counter: Counter) {
    (request as Counted)[COUNTER] = counter;
    try {
      const state = await limiter(request);
      return state.isAllowed ? undefined : state;
    } catch (error) {
      cache.failed?.(error);
      if (Date.now() - lastWarning > WINDOW_MS) {
        lastWarning = Date.now();
        request.log.warn({ err: error }, 'rate limits are not enforced: their counters are unreachable');
      }
      return undefined;
    }
  }

  const refusal = (counter: Counter, retryAfterMs: number) =>
    rateLimited(
      DESCRIPTIONS[counter.source],
      counter.max,
      Math.max(1, Math.ceil(retryAfterMs / 1000)),
      counter.source,
    );

  /** Counts the request against `counter`: the RateLimit-* headers, or 429 past the limit. */
  async function charge(request: FastifyRequest, reply: FastifyReply, counter: Counter): Promise<void> {
    if (counter.max === 0) return;
    const state = await count(request, counter);
    if (!state) return;
    if (state.isExceeded) {
      throw refusal(counter, state.ttl);
    }
    reply.headers({
      'ratelimit-limit': state.max,
      'ratelimit-remaining': state.remaining,
      'ratelimit-reset': state.ttlInSeconds,
    });
  }

  // Addresses past their failed-authentication limit, each until its window ends. Kept in each process
  // so that the check costs no round trip: with Redis, a node learns of it at the first failure it sees
  // itself.
  const refused = new LRUCache<string, true>({ max: REMEMBERED_ADDRESSES, ttlAutopurge: false });
  const failures = (address: string): Counter => ({
    source: 'failed_auth',
    key: `auth-failures:${address}`,
    max: limits.authFailuresPerMinute,
  });

  function refuseGuesser(request: FastifyRequest): DomainError | undefined {
    if (refused.size === 0) return undefined;
    const address = clientAddress(request);
    if (!refused.get(address)) return undefined;
    const left = refused.getRemainingTTL(address);
    return refusal(failures(address), left);
  }

  async function countAuthFailure(request: FastifyRequest): Promise<void> {
    if (limits.authFailuresPerMinute === 0) return;
    const address = clientAddress(request);
    const state = await count(request, failures(address));
    if (!state || state.remaining > 0) return;
    // lru-cache keeps an entry of TTL 0 for good: a window that has just ended refuses nothing.
    if (state.ttl > 0) refused.set(address, true, { ttl: state.ttl });
  }

  // Every 401 counts against the client address.
  app.addHook('onError', async (request, _reply, error) => {
    if (error instanceof DomainError && httpStatus(error) === 401) await countAuthFailure(request);
  });

  const beforeAuth: onRequestHookHandler = (request, reply, done) => {
    const { access, limitGroup } = request.routeOptions.config;
    if (limitGroup === 'none') return done();
    if (access !== undefined && access !== 'public') return done(refuseGuesser(request));
    const address = clientAddress(request);
    const counter: Counter =
      limitGroup === 'objects'
        ? { source: 'object_urls', key: `objects:${address}`, max: limits.objectsPerMinute }
        : { source: 'client_ip', key: `ip:${address}`, max: limits.ipPerMinute };
    charge(request, reply, counter).then(() => done(), done);
  };

  /** The caller's counter; none for the admin key (the operator's, as exempt as from IP allowlists). */
  function callerCounter(principal: Principal, project: Project | null): Counter | undefined {
    switch (principal.kind) {
      case 'admin':
        return undefined;
      case 'upload_token':
        return {
          source: 'upload_token',
          key: `token:${principal.tokenId}`,
          max: limits.uploadTokenPerMinute,
        };
      case 'api_key': {
        // The route's project is the key's own once authentication passed (absent on routes without one).
        const override = project?.settings.rate_limit_per_minute ?? null;
        return override === null
          ? { source: 'api_key', key: `key:${principal.keyId}`, max: limits.apiKeyPerMinute }
          : { source: 'project', key: `key:${principal.keyId}`, max: override };
      }
      case 's3_credential':
        // A key of the project as an API key is: the same default, and the project's override.
        return {
          source: 's3_credential',
          key: `s3:${principal.credentialId}`,
          max: project?.settings.rate_limit_per_minute ?? limits.apiKeyPerMinute,
        };
    }
  }

  const chargeCaller = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const counter = request.principal && callerCounter(request.principal, request.project as Project | null);
    if (counter) await charge(request, reply, counter);
  };
  const afterAuth: onRequestHookHandler = (request, reply, done) => {
    chargeCaller(request, reply).then(() => done(), done);
  };

  return { beforeAuth, afterAuth, chargeCaller, refuseGuesser, countAuthFailure };
}
