/**
 * OpenTelemetry tracing, started by main.ts before any other module of Coffer is loaded, and only
 * when the OTEL_* variables ask for it (config.ts, tracingRequested): an untraced process never
 * loads this file nor the SDK. The instrumentations patch the libraries as they are imported, so
 * they must be in place first. Spans go over OTLP/HTTP (JSON) to OTEL_EXPORTER_OTLP_ENDPOINT.
 */
import { register as registerImportHooks } from 'import-in-the-middle/register-hooks.mjs';

/** The libraries instrumented by patching their exports as they are imported (the others use diagnostics channels). */
const PATCHED = [
  'pino',
  'ioredis',
  '@smithy/middleware-stack',
  '@smithy/smithy-client',
  '@smithy/core',
  '@aws-sdk/middleware-stack',
  '@aws-sdk/smithy-client',
];
// Before the SDK and the instrumentations load: only the modules named are intercepted.
registerImportHooks({ include: PATCHED });

const api = await import('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks');
const { W3CTraceContextPropagator } = await import('@opentelemetry/core');
const { detectResources, envDetector, resourceFromAttributes } = await import('@opentelemetry/resources');
const sdk = await import('@opentelemetry/sdk-trace');
const { enableSpans } = await import('./infra/spans.ts');
type ReadableSpan = import('@opentelemetry/sdk-trace').ReadableSpan;
type SpanProcessor = import('@opentelemetry/sdk-trace').SpanProcessor;
type Sampler = import('@opentelemetry/sdk-trace').Sampler;

/**
 * OTEL_TRACES_SAMPLER and its argument, as the specification names them (config.ts checked them);
 * parent-based always-on by default.
 */
function samplerFromEnv(env: NodeJS.ProcessEnv): Sampler {
  const name = env.OTEL_TRACES_SAMPLER?.trim() || 'parentbased_always_on';
  const ratio = new sdk.TraceIdRatioBasedSampler(Number(env.OTEL_TRACES_SAMPLER_ARG?.trim() || '1'));
  const roots: Record<string, Sampler> = {
    always_on: new sdk.AlwaysOnSampler(),
    always_off: new sdk.AlwaysOffSampler(),
    traceidratio: ratio,
  };
  if (roots[name]) return roots[name];
  const root = roots[name.replace(/^parentbased_/, '')];
  if (name.startsWith('parentbased_') && root) return new sdk.ParentBasedSampler({ root });
  throw new Error(`OTEL_TRACES_SAMPLER: unknown sampler ${JSON.stringify(name)}`);
}

/** URL attributes keep no query: a presigned URL's is its signature (X-Amz-Signature, signature). */
const URL_ATTRIBUTES = ['url.full', 'url.path', 'http.url', 'http.target'];
const withoutQuery = (value: string) => value.replace(/[?#].*$/s, '');

/** Drops what may hold a secret from a finished span before it is exported (whichever library made it). */
function scrub(span: ReadableSpan): void {
  const attributes = span.attributes as Record<string, unknown>;
  for (const key of URL_ATTRIBUTES) {
    const value = attributes[key];
    if (typeof value === 'string') attributes[key] = withoutQuery(value);
  }
  for (const key of Object.keys(attributes)) {
    if (key === 'url.query' || /authorization|cookie|signature|secret|token/i.test(key))
      delete attributes[key];
  }
}

function scrubbing(inner: SpanProcessor): SpanProcessor {
  return {
    onStart: (span, parent) => inner.onStart(span, parent),
    onEnd(span) {
      scrub(span);
      inner.onEnd(span);
    },
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
  };
}

async function exporters(env: NodeJS.ProcessEnv): Promise<SpanProcessor[]> {
  const names = (env.OTEL_TRACES_EXPORTER ?? 'otlp').split(',').map((name) => name.trim());
  const processors: SpanProcessor[] = [];
  if (names.includes('otlp')) {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    const delay = Number(env.OTEL_BSP_SCHEDULE_DELAY);
    const batch = new sdk.BatchSpanProcessor({
      exporter: new OTLPTraceExporter(),
      ...(delay > 0 ? { scheduledDelayMillis: delay } : {}),
    });
    processors.push(scrubbing(batch));
  }
  if (names.includes('console')) {
    processors.push(scrubbing(new sdk.SimpleSpanProcessor({ exporter: new sdk.ConsoleSpanExporter() })));
  }
  return processors;
}

/**
 * Starts tracing for this process (`command`: serve, worker…, a resource attribute) and returns the
 * function that flushes and stops it.
 */
export async function startTracing(command: string): Promise<() => Promise<void>> {
  const env = process.env;
  const detected = await detectResources({ detectors: [envDetector] });
  const provider = new sdk.TracerProvider({
    sampler: samplerFromEnv(env),
    resource: resourceFromAttributes({ 'service.name': 'coffer', 'coffer.command': command }).merge(detected),
    spanProcessors: await exporters(env),
    spanLimits: { attributeValueLengthLimit: 2048 },
  });
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  api.trace.setGlobalTracerProvider(provider);
  enableSpans(api);

  const [{ FastifyOtelInstrumentation }, { UndiciInstrumentation }, { IORedisInstrumentation }, aws, pino] =
    await Promise.all([
      import('@fastify/otel'),
      import('@opentelemetry/instrumentation-undici'),
      import('@opentelemetry/instrumentation-ioredis'),
      import('@opentelemetry/instrumentation-aws-sdk'),
      import('@opentelemetry/instrumentation-pino'),
    ]);
  const instrumentations = [
    new FastifyOtelInstrumentation({
      registerOnInitialization: true,
      // One span per request: hook and handler spans would be named after anonymous functions.
      instrumentHooks: false,
      instrumentHandler: false,
      // Probes of load balancers and orchestrators, every few seconds: no story to tell.
      ignorePaths: (route) => route.url.startsWith('/health/'),
      requestHook(span, request) {
        // Named by the route's template, never the raw path (which holds ids and keys).
        span.updateName(`${request.method} ${request.routeOptions.url ?? 'unmatched route'}`);
      },
    }),
    // Webhook deliveries: a client span per attempt, its `traceparent` sent along.
    new UndiciInstrumentation(),
    // Redis commands (cache, rate limits) by command name only: keys and values stay out.
    new IORedisInstrumentation({ dbStatementSerializer: (command) => command }),
    new aws.AwsInstrumentation({ suppressInternalInstrumentation: true }),
    // Log lines carry trace_id and span_id of the active span.
    new pino.PinoInstrumentation({ disableLogSending: true }),
  ];
  // Each is enabled as it is made; the provider is named all the same, whatever the global one.
  for (const instrumentation of instrumentations) instrumentation.setTracerProvider(provider);
  return async () => {
    await provider.shutdown();
  };
}
