import type { Redis } from 'ioredis';
import { withTimeout } from './db.ts';

/** A shared key-value cache with expiry: Redis in production, process memory on the embedded default. */
export interface Cache {
  /** Whether every process sees the same entries (and evictions), or only this one. */
  readonly shared: boolean;
  /** The Redis connection behind a shared cache, for counters that need its own commands (rate limits). */
  readonly redis?: Redis;
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string, ttlSeconds: number): Promise<void>;
  del(key: string): Promise<void>;
  ping(timeoutMs: number): Promise<void>;
  /**
   * Hears of a command of its connection that failed elsewhere (the rate limiter's counters): a
   * command that timed out drops the connection, as the cache's own do (see redisCache).
   */
  failed?(error: unknown): void;
  close(): Promise<void>;
}

export function memoryCache(): Cache {
  const entries = new Map<string, { value: string; expiresAt: number }>();
  return {
    shared: false,
    async get(key) {
      const entry = entries.get(key);
      if (!entry) return undefined;
      if (entry.expiresAt <= Date.now()) {
        entries.delete(key);
        return undefined;
      }
      return entry.value;
    },
    async set(key, value, ttlSeconds) {
      entries.set(key, { value, expiresAt: Date.now() + ttlSeconds * 1000 });
    },
    async del(key) {
      entries.delete(key);
    },
    async ping() {},
    async close() {
      entries.clear();
    },
  };
}

/** Keeps nothing: every read goes to the source of truth. */
export function noCache(): Cache {
  return {
    shared: true,
    async get() {
      return undefined;
    },
    async set() {},
    async del() {},
    async ping() {},
    async close() {},
  };
}

/** ioredis is loaded only here, so that a process without Redis (the embedded default) never holds it. */
export async function redisCache(url: string, keyPrefix = 'coffer:'): Promise<Cache> {
  const { Redis: RedisClient } = await import('ioredis');
  const redis = new RedisClient(url, {
    keyPrefix,
    lazyConnect: false,
    // Fail fast while Redis is away instead of queueing; ioredis keeps reconnecting in the background.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    // A Redis that hangs (accepts, never answers) fails each command instead of stalling requests:
    // the cache then reads from the database and rate limits fail open.
    commandTimeout: 500,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  // Connection errors surface through the readiness probe; without a listener ioredis would log them.
  redis.on('error', () => {});
  /**
   * A command that timed out on a connection that was ready means Redis hangs: the connection is
   * dropped and made again, and until Redis answers its handshake every command fails at once
   * (offline queue off) instead of each waiting for its own timeout.
   */
  const failed = (error: unknown) => {
    if (error instanceof Error && error.message === 'Command timed out' && redis.status === 'ready') {
      redis.disconnect(true);
    }
  };
  const watched = async <T>(command: Promise<T>): Promise<T> => {
    try {
      return await command;
    } catch (error) {
      failed(error);
      throw error;
    }
  };
  return {
    shared: true,
    redis,
    async get(key) {
      return (await watched(redis.get(key))) ?? undefined;
    },
    async set(key, value, ttlSeconds) {
      await watched(redis.set(key, value, 'EX', Math.max(1, Math.ceil(ttlSeconds))));
    },
    async del(key) {
      await watched(redis.del(key));
    },
    failed,
    async ping(timeoutMs) {
      await withTimeout(redis.ping(), timeoutMs);
    },
    async close() {
      redis.disconnect();
    },
  };
}
