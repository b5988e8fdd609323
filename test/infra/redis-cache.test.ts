import { describe, expect, it } from 'vitest';
import { redisCache } from '../../src/infra/cache.ts';
import { namespace } from '../support/backends.ts';
import { startProxy } from '../support/proxy.ts';
import { answering } from '../support/redis.ts';

describe.runIf(process.env.COFFER_TEST_REDIS_URL)('the Redis cache', () => {
  it('drops a connection whose Redis hangs, fails at once until Redis answers, then recovers', async () => {
    const redis = new URL(process.env.COFFER_TEST_REDIS_URL!);
    const proxy = await startProxy(redis.hostname, Number(redis.port || 6379));
    const cache = await redisCache(`redis://127.0.0.1:${proxy.port}`, `${namespace()}:breaker:`);
    try {
      await answering(cache, 5000);
      proxy.freeze();
      await expect(cache.get('k')).rejects.toThrow('Command timed out');
      // The hung connection was dropped: the next commands are refused without waiting for Redis.
      for (let i = 0; i < 3; i++) await expect(cache.get('k')).rejects.toThrow(/isn't writeable/);
      proxy.thaw();
      await answering(cache, 10_000);
      await cache.set('k', 'v', 60);
      expect(await cache.get('k')).toBe('v');
    } finally {
      await cache.close();
      await proxy.close();
    }
  });
});
