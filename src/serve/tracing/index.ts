/**
 * OpenTelemetry traces of the requests `serve` answers (`--enable-otel`), exported over OTLP/HTTP (JSON) by the
 * official SDK. Loaded only when enabled: the SDK and its exporter are a few hundred kilobytes of code that a server
 * without tracing does not load.
 *
 * A request is one SERVER span, child of the caller's span when its `traceparent` (HTTP header, gRPC metadata) says
 * one, with a child span per phase the pipeline reports (request-phases.ts): tokenize, queue wait, onnxruntime run.
 * The phases ran partly on other threads (tokenizer and inference workers); they are recorded after the fact with
 * the start and end times those threads measured, so no context needs to cross a thread.
 */
import type { PhaseRecorder } from '../../encoder/request-phases.ts';

export interface RequestTracerOptions {
  /** `--otel-exporter-url`; undefined: the SDK's (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318/v1/traces). */
  exporterUrl?: string;
  /** service.name unless OTEL_SERVICE_NAME says otherwise. */
  serviceName: string;
  serviceVersion: string;
  /** Attributes of every span's resource, e.g. the model's id. */
  resourceAttributes?: Record<string, string>;
}

/** Where the caller's trace context is read: an HTTP request's headers or a gRPC call's metadata, by lowercase name. */
export type TraceCarrier = (name: string) => string | undefined;

export interface ServerSpan {
  /** What the pipeline reports the request's phases to. */
  readonly phases: PhaseRecorder;
  /** Ends the request's span; `error` marks it failed (a 5xx, a gRPC status other than OK). */
  end(attributes: Record<string, string | number>, error?: string): void;
}

export interface RequestTracer {
  startRequest(name: string, carrier: TraceCarrier, attributes: Record<string, string | number>): ServerSpan;
  /** Exports what is still buffered, then stops. */
  shutdown(): Promise<void>;
  /** Where spans go, for the banner. */
  readonly endpoint: string;
}

/** `--otel-exporter-url` as OTLP/HTTP takes it: a URL with no path is a collector's base URL, to which /v1/traces is added. */
export function tracesUrlOf(url: string): string {
  const parsed = new URL(url);
  if (parsed.pathname === '/' || parsed.pathname === '') parsed.pathname = '/v1/traces';
  return parsed.toString();
}

/** Where the exporter sends without a URL of ours, as it reads the standard variables (for the banner). */
function endpointFromEnvironment(env: NodeJS.ProcessEnv = process.env): string {
  if (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (env.OTEL_EXPORTER_OTLP_ENDPOINT) return `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/$/, '')}/v1/traces`;
  return 'http://localhost:4318/v1/traces';
}

export async function createRequestTracer(options: RequestTracerOptions): Promise<RequestTracer> {
  const [api, { TracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { W3CTraceContextPropagator, getNumberFromEnv }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/core'),
    import('@opentelemetry/resources'),
  ]);
  const exporter = new OTLPTraceExporter(options.exporterUrl === undefined ? {} : { url: options.exporterUrl });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      'service.name': process.env.OTEL_SERVICE_NAME || options.serviceName,
      'service.version': options.serviceVersion,
      ...options.resourceAttributes,
    }),
    // the default sampler: the caller's decision when it sent one (traceparent's flags), else every request
    // OTEL_BSP_*: the SDK's batching variables, which the SDK itself reads only through its Node distribution
    spanProcessors: [
      new BatchSpanProcessor({
        exporter,
        scheduledDelayMillis: getNumberFromEnv('OTEL_BSP_SCHEDULE_DELAY'),
        exportTimeoutMillis: getNumberFromEnv('OTEL_BSP_EXPORT_TIMEOUT'),
        maxQueueSize: getNumberFromEnv('OTEL_BSP_MAX_QUEUE_SIZE'),
        maxExportBatchSize: getNumberFromEnv('OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
      }),
    ],
  });
  const tracer = provider.getTracer('encoder', options.serviceVersion);
  const propagator = new W3CTraceContextPropagator();
  const getter = {
    keys: () => ['traceparent', 'tracestate'],
    get: (carrier: TraceCarrier, key: string) => carrier(key),
  };

  return {
    endpoint: options.exporterUrl ?? endpointFromEnvironment(),
    startRequest(name, carrier, attributes) {
      const parent = propagator.extract(api.ROOT_CONTEXT, carrier, getter);
      const span = tracer.startSpan(name, { kind: api.SpanKind.SERVER, attributes }, parent);
      const context = api.trace.setSpan(parent, span);
      return {
        phases: {
          phase(phase, startMs, endMs, phaseAttributes) {
            tracer.startSpan(phase, { kind: api.SpanKind.INTERNAL, startTime: startMs, attributes: phaseAttributes }, context).end(endMs);
          },
        },
        end(endAttributes, error) {
          span.setAttributes(endAttributes);
          if (error !== undefined) span.setStatus({ code: api.SpanStatusCode.ERROR, message: error });
          span.end();
        },
      };
    },
    shutdown: () => provider.shutdown(),
  };
}
