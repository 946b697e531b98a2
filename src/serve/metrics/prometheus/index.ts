/** serve's prom-client metrics: a split bundle of the executable (runtime/split-bundles.ts), loaded after listening. */
export { PrometheusMetrics, type MetricsSource } from './prometheus-metrics.ts';
