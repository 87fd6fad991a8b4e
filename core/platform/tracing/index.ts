/**
 * OpenTelemetry tracing (docs/operations.md "Observability"): one trace per turn, api → workflow → activities → agent backend →
 * inner LLM call. Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (or a test hands in its own exporter): then
 * nothing is installed, no interceptor runs, and the helpers below return at their first line.
 *
 * Propagation is W3C `traceparent`: Temporal carries it in workflow and activity headers (Temporal's OpenTelemetry
 * interceptors); our own HTTP hops (POST /runs and the backend's other calls, the backend's inner LLM call) carry
 * it as an HTTP header, and every server here opens its span from it (`traceRequests`).
 */
import { context, propagation, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, SimpleSpanProcessor, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { Request, RequestHandler } from 'express';

interface Installed {
  provider: NodeTracerProvider;
  processor: SpanProcessor;
  resource: Resource;
}

let installed: Installed | null = null;

export interface TracingOptions {
  serviceName: string;
  /** OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT): spans go to `<endpoint>/v1/traces`. */
  endpoint?: string;
  /** Instead of OTLP (tests: the SDK's InMemorySpanExporter); spans are exported one by one. */
  exporter?: SpanExporter;
}

/**
 * Installs the process's tracer provider (global, once) when an endpoint or exporter is given; returns whether
 * tracing is on. A second call is a no-op: the in-process stack's api, worker and backend share one provider.
 */
export function initTracing(opts: TracingOptions): boolean {
  if (installed) return true;
  if (!opts.endpoint && !opts.exporter) return false;
  const resource = new Resource({ 'service.name': opts.serviceName });
  const processor = opts.exporter
    ? new SimpleSpanProcessor(opts.exporter)
    : new BatchSpanProcessor(new OTLPTraceExporter({ url: `${opts.endpoint!.replace(/\/+$/, '')}/v1/traces` }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  // Registers the AsyncLocalStorage context manager and the W3C trace-context propagator too.
  provider.register();
  installed = { provider, processor, resource };
  return true;
}

export function tracingActive(): boolean {
  return installed !== null;
}

/** The provider's processor and resource, for the worker's workflow-span sink. */
export function tracingInternals(): { processor: SpanProcessor; resource: Resource } | null {
  return installed;
}

/** Flushes and stops the provider (process exit). */
export async function shutdownTracing(): Promise<void> {
  const i = installed;
  installed = null;
  await i?.provider.shutdown().catch(() => undefined);
}

export function tracer(): Tracer {
  return trace.getTracer('dify-agent');
}

/** The active trace id, for log lines (pino mixin) and what the api shows of a turn. */
export function activeTraceIds(): { trace_id: string; span_id: string } | null {
  if (!installed) return null;
  const span = trace.getSpan(context.active());
  const sc = span?.spanContext();
  return sc && trace.isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : null;
}

/** `headers` plus `traceparent` (and `tracestate`) of the active span; the same object when tracing is off. */
export function withTraceHeaders<T extends Record<string, string>>(headers: T): T {
  if (!installed) return headers;
  const out = { ...headers };
  propagation.inject(context.active(), out);
  return out;
}

/** A low-cardinality span name: the route pattern when Express matched one, else the method alone. */
function routeName(req: Request): string {
  const route = (req.route as { path?: string } | undefined)?.path;
  return route ? `${req.method} ${req.baseUrl}${route}` : req.method;
}

/**
 * Express middleware: a SERVER span per request, child of the caller's `traceparent` if any, active for the
 * handler and everything it awaits (streams included); ended when the response ends.
 */
export function traceRequests(component: string): RequestHandler {
  return (req, res, next) => {
    if (!installed) return next();
    const parent = propagation.extract(context.active(), req.headers);
    const span: Span = tracer().startSpan(
      `${req.method} ${req.path.split('/').slice(0, 3).join('/')}`,
      { kind: SpanKind.SERVER, attributes: { component, 'http.method': req.method, 'http.target': req.path } },
      parent,
    );
    const end = () => {
      span.updateName(routeName(req));
      span.setAttribute('http.status_code', res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    };
    res.once('finish', end);
    res.once('close', () => span.isRecording() && end());
    context.with(trace.setSpan(parent, span), next);
  };
}

/** Runs `fn` in a CLIENT/INTERNAL span when tracing is on (else just runs it). */
export async function inSpan<T>(name: string, attributes: Record<string, string | number>, fn: () => Promise<T>): Promise<T> {
  if (!installed) return fn();
  return tracer().startActiveSpan(name, { kind: SpanKind.CLIENT, attributes }, async (span) => {
    try {
      return await fn();
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
      throw err;
    } finally {
      span.end();
    }
  });
}
