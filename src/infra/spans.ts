import type * as OtelApi from '@opentelemetry/api';

/**
 * Spans around Coffer's own calls (queries, cache, object store, scanner, jobs). Tracing is off
 * unless src/tracing.ts starts it: until then nothing here loads OpenTelemetry (its API is handed in
 * by enableSpans), and every helper runs its work as it is, with nothing recorded.
 */
let otel: { api: typeof OtelApi; tracer: OtelApi.Tracer } | undefined;

/** Called once by src/tracing.ts when tracing is on, before anything that makes spans is created. */
export function enableSpans(api: typeof OtelApi): void {
  otel = { api, tracer: api.trace.getTracer('coffer') };
}

export const spansEnabled = (): boolean => otel !== undefined;

/** Ids (of files, projects, jobs), kinds and counts only: never a secret, a URL's query or content. */
export type SpanAttributes = Record<string, string | number | boolean | null | undefined>;

export interface SpanOptions {
  /** A stored `traceparent` (W3C) to continue instead of the active span: a job's, a delivery's. */
  parent?: string | null;
  kind?: 'internal' | 'client' | 'consumer';
  /** Only within a trace already begun: a worker's polling must not start a trace of its own each time. */
  requireParent?: boolean;
}

function defined(attributes: SpanAttributes): OtelApi.Attributes {
  const out: OtelApi.Attributes = {};
  for (const [key, value] of Object.entries(attributes)) if (value != null) out[key] = value;
  return out;
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as PromiseLike<unknown> | undefined)?.then === 'function';

/**
 * Runs `work` as the active span `name` (a fixed name: ids go in attributes), ending the span when
 * it settles. A failure marks the span with the error's name only: messages may quote values.
 */
export function inSpan<T>(
  name: string,
  attributes: SpanAttributes,
  work: () => T,
  options: SpanOptions = {},
): T {
  if (!otel) return work();
  const { api, tracer } = otel;
  const parent = options.parent
    ? api.propagation.extract(api.ROOT_CONTEXT, { traceparent: options.parent })
    : api.context.active();
  if (options.requireParent && !api.trace.getSpan(parent)) return work();
  const kind = {
    internal: api.SpanKind.INTERNAL,
    client: api.SpanKind.CLIENT,
    consumer: api.SpanKind.CONSUMER,
  }[options.kind ?? 'internal'];
  return tracer.startActiveSpan(name, { kind, attributes: defined(attributes) }, parent, (span) => {
    const failed = (error: unknown) => {
      span.setAttribute('error.type', error instanceof Error ? error.name : typeof error);
      span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.end();
    };
    try {
      const result = work();
      if (!isThenable(result)) {
        span.end();
        return result;
      }
      return Promise.resolve(result).then(
        (value) => {
          span.end();
          return value;
        },
        (error: unknown) => {
          failed(error);
          throw error;
        },
      ) as T;
    } catch (error) {
      failed(error);
      throw error;
    }
  });
}

/** The active span's context as a W3C `traceparent`, to store with work another process picks up; null when off. */
export function currentTraceparent(): string | null {
  if (!otel) return null;
  const carrier: Record<string, string> = {};
  otel.api.propagation.inject(otel.api.context.active(), carrier);
  return carrier.traceparent ?? null;
}

/**
 * `target` with a span around each call of `methods` (named `prefix.method`) made within a trace,
 * when tracing is on (a readiness probe's store check begins none); the object itself otherwise,
 * so that an untraced process calls it directly. Every call reaches `target` as its receiver (a
 * class's private fields need it).
 */
export function withSpans<T extends object>(
  target: T,
  prefix: string,
  methods: readonly (keyof T & string)[],
  attributes: SpanAttributes = {},
): T {
  if (!otel) return target;
  const traced = new Set<string | symbol>(methods);
  const calls = new Map<string | symbol, unknown>();
  return new Proxy(target, {
    get(object, property) {
      const value = Reflect.get(object, property, object);
      if (typeof value !== 'function') return value;
      let call = calls.get(property);
      if (!call) {
        const name = `${prefix}.${String(property)}`;
        call = traced.has(property)
          ? (...args: unknown[]) =>
              inSpan(name, attributes, () => value.apply(object, args), { requireParent: true })
          : value.bind(object);
        calls.set(property, call);
      }
      return call;
    },
  });
}
