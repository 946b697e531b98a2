import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { BatchRun, BatchStats } from '../../../encoder/batch-scheduler.ts';
import type { ServerInfo } from '../../server-info.ts';

/** What the metrics describe: the model served, the runtime, and the scheduler's state at a scrape. */
export interface MetricsSource {
  modelId: string;
  modelType: string;
  serverInfo: ServerInfo;
  batchingStats(): BatchStats;
  /** HTTP requests received and not yet answered; absent: the gauge is not exported. */
  httpRequestsInFlight?(): number;
}

const SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** serve's Prometheus metrics, in a registry of its own (tests run several servers in one process). */
export class PrometheusMetrics {
  readonly registry = new Registry();
  readonly #httpRequests = new Counter({
    name: 'encoder_http_requests_total',
    help: 'HTTP requests answered (MCP at /mcp included), by route, method and status code',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly #httpDuration = new Histogram({
    name: 'encoder_http_request_duration_seconds',
    help: 'Time from an HTTP request to its response, by route and method',
    labelNames: ['route', 'method'] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly #grpcRequests = new Counter({
    name: 'encoder_grpc_requests_total',
    help: 'gRPC calls of the encoder services answered, by method and status code',
    labelNames: ['method', 'code'] as const,
    registers: [this.registry],
  });
  readonly #grpcDuration = new Histogram({
    name: 'encoder_grpc_request_duration_seconds',
    help: 'Time from a gRPC call of an encoder service to its answer, by method',
    labelNames: ['method'] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly #runs = new Counter({
    name: 'encoder_inference_runs_total',
    help: 'onnxruntime runs (each holds the batched inputs of one or more requests), by outcome (ok or failed)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly #runDuration = new Histogram({
    name: 'encoder_inference_run_duration_seconds',
    help: 'Time of one run: padding, onnxruntime on a worker thread, and the Lua transform',
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly #batchRows = new Histogram({
    name: 'encoder_batch_rows',
    help: 'Rows (inputs, from one or more requests) per onnxruntime run',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
    registers: [this.registry],
  });
  readonly #batchTokens = new Histogram({
    name: 'encoder_batch_tokens',
    help: 'Tokens per onnxruntime run with padding (rows x longest row)',
    buckets: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    registers: [this.registry],
  });
  readonly #tokens = new Counter({
    name: 'encoder_tokens_total',
    help: 'Tokens run, by kind: input (the tokenized inputs) or padding (added to make a batch rectangular)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly #queueWait = new Histogram({
    name: 'encoder_queue_wait_seconds',
    help: 'Time an input waited for its run to start (batching across requests)',
    buckets: SECONDS,
    registers: [this.registry],
  });

  constructor(source: MetricsSource) {
    const { version, build } = source.serverInfo;
    new Gauge({
      name: 'encoder_info',
      help: 'The model served and the runtime serving it; the value is always 1',
      labelNames: ['model_id', 'model_type', 'version', 'node', 'onnxruntime', 'target'] as const,
      registers: [this.registry],
    }).set({ model_id: source.modelId, model_type: source.modelType, version, ...build }, 1);
    new Gauge({
      name: 'encoder_queue_inputs',
      help: 'Inputs waiting for a run now',
      registers: [this.registry],
      collect() {
        this.set(source.batchingStats().queuedSequences);
      },
    });
    new Gauge({
      name: 'encoder_inference_runs_in_flight',
      help: 'onnxruntime runs going now',
      registers: [this.registry],
      collect() {
        this.set(source.batchingStats().runsInFlight);
      },
    });
    if (source.httpRequestsInFlight) {
      const inFlight = source.httpRequestsInFlight.bind(source);
      new Gauge({
        name: 'encoder_http_requests_in_flight',
        help: 'HTTP requests received and not yet answered (MCP at /mcp and this scrape included)',
        registers: [this.registry],
        collect() {
          this.set(inFlight());
        },
      });
    }
    collectDefaultMetrics({ register: this.registry, prefix: 'encoder_' });
  }

  httpRequest(route: string, method: string, status: number, seconds: number): void {
    this.#httpRequests.inc({ route, method, status: String(status) });
    this.#httpDuration.observe({ route, method }, seconds);
  }

  grpcRequest(method: string, code: string, seconds: number): void {
    this.#grpcRequests.inc({ method, code });
    this.#grpcDuration.observe({ method }, seconds);
  }

  batchRun(run: BatchRun): void {
    this.#runs.inc({ outcome: run.failed ? 'failed' : 'ok' });
    this.#runDuration.observe(run.durationMs / 1000);
    this.#batchRows.observe(run.rows);
    this.#batchTokens.observe(run.paddedTokens);
    this.#tokens.inc({ kind: 'input' }, run.tokens);
    this.#tokens.inc({ kind: 'padding' }, run.paddedTokens - run.tokens);
    for (const waited of run.queueWaitsMs) this.#queueWait.observe(waited / 1000);
  }
}
