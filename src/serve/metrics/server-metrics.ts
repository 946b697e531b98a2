import type { BatchRun } from '../../encoder/batch-scheduler.ts';
import type { MetricsSource, PrometheusMetrics } from './prometheus/index.ts';

/**
 * How long after the server listens prom-client loads: evaluating it (and its process metrics) holds the event loop
 * for tens of milliseconds on a slow machine, which the first requests, the ones start-up is judged by, should not wait
 * for. A scrape before then loads it at once.
 */
export const METRICS_LOAD_DELAY_MS = 1000;

/**
 * serve's metrics (GET /metrics). Every front end records into it from the first request; until prom-client has
 * loaded, what they record waits in a backlog and is replayed into the registry when it has, so nothing is lost.
 */
export class ServerMetrics {
  readonly #source: MetricsSource;
  #metrics: PrometheusMetrics | undefined;
  #backlog: ((metrics: PrometheusMetrics) => void)[] = [];
  #loading: Promise<PrometheusMetrics> | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(source: MetricsSource) {
    this.#source = source;
  }

  httpRequest(route: string, method: string, status: number, seconds: number): void {
    this.#record((metrics) => metrics.httpRequest(route, method, status, seconds));
  }

  grpcRequest(method: string, code: string, seconds: number): void {
    this.#record((metrics) => metrics.grpcRequest(method, code, seconds));
  }

  batchRun(run: BatchRun): void {
    this.#record((metrics) => metrics.batchRun(run));
  }

  /** Whether prom-client has loaded (until then, what is recorded waits in the backlog). */
  get loaded(): boolean {
    return this.#metrics !== undefined;
  }

  /** Loads prom-client METRICS_LOAD_DELAY_MS from now (the server has started listening), unless a scrape does first. */
  loadSoon(): void {
    this.#timer ??= setTimeout(() => void this.#load().catch(() => {}), METRICS_LOAD_DELAY_MS).unref();
  }

  /** The Prometheus text exposition of every metric, and its content type. */
  async exposition(): Promise<{ contentType: string; text: string }> {
    const { registry } = await this.#load();
    return { contentType: registry.contentType, text: await registry.metrics() };
  }

  /** Stops a pending load (the server is closing). */
  close(): void {
    clearTimeout(this.#timer);
  }

  #record(write: (metrics: PrometheusMetrics) => void): void {
    if (this.#metrics) write(this.#metrics);
    else this.#backlog.push(write);
  }

  #load(): Promise<PrometheusMetrics> {
    this.#loading ??= import('./prometheus/index.ts').then(({ PrometheusMetrics }) => {
      const metrics = new PrometheusMetrics(this.#source);
      for (const write of this.#backlog) write(metrics);
      this.#backlog = [];
      this.#metrics = metrics;
      return metrics;
    });
    return this.#loading;
  }
}
