import { type Command, InvalidArgumentError, Option } from 'commander';
import type { RequestTracer } from '../serve/tracing/index.ts';

export interface TracingCommandOptions {
  enableOtel?: boolean;
  otelExporterUrl?: string;
}

/** Adds serve's OpenTelemetry options (encoderfile's names). */
export function addTracingOptions(command: Command): Command {
  return command
    .option('--enable-otel', 'export OpenTelemetry traces of the requests (OTLP/HTTP): a span per request with tokenize, queue wait and onnxruntime run')
    .addOption(
      new Option(
        '--otel-exporter-url <url>',
        'where --enable-otel sends traces, OTLP/HTTP: a collector base URL (http://collector:4318, /v1/traces is added) or the full traces URL (default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318/v1/traces)',
      ).argParser(parseExporterUrl),
    );
}

function parseExporterUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError(`"${value}" is not a URL; give the collector's OTLP/HTTP address, e.g. http://localhost:4318`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError(`"${value}" is not an http:// or https:// URL (OTLP/HTTP)`);
  return value;
}

/**
 * The request tracer `--enable-otel` asks for, the OpenTelemetry SDK loaded only then; null without it. `notes` gets a
 * line for an --otel-exporter-url given without --enable-otel (encoderfile takes it silently; here it says so).
 */
export async function tracerOf(options: TracingCommandOptions, service: { name: string; version: string; modelId: string }, notes: string[]): Promise<RequestTracer | null> {
  if (!options.enableOtel) {
    if (options.otelExporterUrl !== undefined) notes.push('--otel-exporter-url has no effect without --enable-otel: no traces are exported');
    return null;
  }
  const { createRequestTracer, tracesUrlOf } = await import('../serve/tracing/index.ts');
  return createRequestTracer({
    exporterUrl: options.otelExporterUrl === undefined ? undefined : tracesUrlOf(options.otelExporterUrl),
    serviceName: service.name,
    serviceVersion: service.version,
    resourceAttributes: { 'encoder.model.id': service.modelId },
  });
}
