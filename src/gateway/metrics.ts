import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The gateway's Prometheus metrics, in a registry of its own (several gateways can live in one process). */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'gateway_http_requests_total',
    help: 'HTTP requests answered, by route, method and status code',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: 'gateway_http_request_duration_seconds',
    help: 'Time from request to response, by route',
    labelNames: ['route', 'method'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly tokens = new Counter({
    name: 'gateway_tokens_total',
    help: 'Tokens used by model calls, by provider, model and kind (prompt or completion)',
    labelNames: ['provider', 'model', 'kind'] as const,
    registers: [this.registry],
  });
  readonly cost = new Counter({
    name: 'gateway_cost_usd_total',
    help: 'Cost of model calls in US dollars (from the pricing table), by provider and model',
    labelNames: ['provider', 'model'] as const,
    registers: [this.registry],
  });
  readonly upstreamCalls = new Counter({
    name: 'gateway_upstream_calls_total',
    help: 'Calls to providers, by provider, endpoint and outcome',
    labelNames: ['provider', 'endpoint', 'status'] as const,
    registers: [this.registry],
  });
  readonly routeFallbacks = new Counter({
    name: 'gateway_route_fallbacks_total',
    help: 'Attempts of model route calls that failed and passed the call to the next target, by route, provider of the failed target and error code',
    labelNames: ['route', 'provider', 'code'] as const,
    registers: [this.registry],
  });
  readonly authFailures = new Counter({
    name: 'gateway_auth_failures_total',
    help: 'Requests refused for their credential, by reason (error code)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly connectionsRefused = new Counter({
    name: 'gateway_connections_refused_total',
    help: 'Client connections closed on arrival: too many open (max_connections) or too many of one client (max_connections_per_client)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly budgetRejections = new Counter({
    name: 'gateway_budget_rejections_total',
    help: 'Model calls refused because a budget was exhausted',
    labelNames: ['scope'] as const,
    registers: [this.registry],
  });
  readonly budgetOvershoots = new Counter({
    name: 'gateway_budget_overshoots_total',
    help: 'Model calls that cost more than their budget hold (the provider answered beyond the output limit it was sent)',
    labelNames: ['provider', 'model'] as const,
    registers: [this.registry],
  });
  readonly rateLimited = new Counter({
    name: 'gateway_rate_limited_total',
    help: 'Model calls refused by the gateway rate limit',
    registers: [this.registry],
  });
  readonly usageBatchRows = new Histogram({
    name: 'gateway_usage_batch_rows',
    help: 'Usage rows written per database transaction (group commit)',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
    registers: [this.registry],
  });
  readonly usageWriteFailures = new Counter({
    name: 'gateway_usage_write_failures_total',
    help: 'Usage rows that could not be written',
    registers: [this.registry],
  });

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'gateway_' });
  }
}
