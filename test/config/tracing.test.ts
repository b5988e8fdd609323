import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ConfigError, tracingRequested } from '../../src/config.ts';
import { memoryCache } from '../../src/infra/cache.ts';
import { withQuerySpans } from '../../src/infra/db-spans.ts';
import { currentTraceparent, inSpan, spansEnabled, withSpans } from '../../src/infra/spans.ts';
import { testDb } from '../support/backends.ts';

describe('tracing switch (OTEL_* variables)', () => {
  it('is off unless the variables ask for traces', () => {
    expect(tracingRequested({})).toBe(false);
    expect(tracingRequested({ OTEL_SERVICE_NAME: 'coffer' })).toBe(false);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })).toBe(true);
    expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'console' })).toBe(true);
    // Explicitly off wins over an endpoint.
    expect(
      tracingRequested({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }),
    ).toBe(false);
    expect(
      tracingRequested({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }),
    ).toBe(false);
  });

  it('refuses an exporter or a protocol it does not have', () => {
    expect(() => tracingRequested({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(ConfigError);
    expect(() =>
      tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
    ).toThrow(/OTLP\/HTTP/);
    // A protocol set for other signals does not matter while traces are off.
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toBe(false);
    expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBe(
      true,
    );
    const on = { OTEL_TRACES_EXPORTER: 'otlp' };
    expect(() => tracingRequested({ ...on, OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(
      /OTEL_TRACES_SAMPLER/,
    );
    expect(() => tracingRequested({ ...on, OTEL_TRACES_SAMPLER_ARG: '1.5' })).toThrow(/a ratio from 0 to 1/);
    expect(
      tracingRequested({
        ...on,
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }),
    ).toBe(true);
  });

  it('stops the process with exit code 2 on an unknown exporter, before loading anything', () => {
    const result = spawnSync(process.execPath, ['src/main.ts', 'serve'], {
      env: { ...process.env, OTEL_TRACES_EXPORTER: 'jaeger' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.status).toBe(2);
    expect(result.stderr.trim()).toBe(
      'Invalid configuration: OTEL_TRACES_EXPORTER: expected otlp, console, none, got "jaeger"',
    );
  });

  it('off, wraps nothing and records nothing: the database, the cache and the spans are the originals', async () => {
    expect(spansEnabled()).toBe(false);
    const db = await testDb();
    expect(withQuerySpans(db)).toBe(db);
    const cache = memoryCache();
    expect(withSpans(cache, 'cache', ['get'])).toBe(cache);
    expect(inSpan('work', {}, () => 42)).toBe(42);
    expect(currentTraceparent()).toBeNull();
  });
});
