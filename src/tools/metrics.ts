import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ApiOperation } from './operations.ts';
import type { Upstreams } from './upstreams.ts';

const HEALTH_STATUSES = ['ok', 'timeout', 'unreachable', 'unknown'] as const;
/** The label of a server that is not configured, or of a tool its server did not list. */
const OTHER = 'other';

/** The tool server's Prometheus metrics (GET /metrics), in a registry of its own. */
export class ToolsMetrics {
  readonly registry = new Registry();
  readonly #requests = new Counter({
    name: 'tools_requests_total',
    help: 'API requests answered, by server, operation and HTTP status',
    labelNames: ['server', 'operation', 'status'] as const,
    registers: [this.registry],
  });
  readonly #calls = new Counter({
    name: 'tools_tool_calls_total',
    help: 'Tool calls answered, by server, tool and HTTP status',
    labelNames: ['server', 'tool', 'status'] as const,
    registers: [this.registry],
  });
  readonly #latency = new Histogram({
    name: 'tools_request_duration_seconds',
    help: 'Time from request to answer, by server and operation',
    labelNames: ['server', 'operation'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  readonly #restarts = new Counter({
    name: 'tools_server_restarts_total',
    help: 'Sessions of an MCP server after its first (restarts after an exit, a failure or a reload)',
    labelNames: ['server'] as const,
    registers: [this.registry],
  });

  #upstreams: Upstreams | undefined;

  constructor() {
    const upstreams = () => this.#upstreams?.all() ?? [];
    new Gauge({
      name: 'tools_server_health',
      help: 'Health of each MCP server: 1 for its current status, 0 for the others',
      labelNames: ['server', 'status'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const upstream of upstreams()) {
          const current = upstream.health().status;
          for (const status of HEALTH_STATUSES) this.set({ server: upstream.name, status }, status === current ? 1 : 0);
        }
      },
    });
  }

  /** The servers whose health the tools_server_health series report. */
  watch(upstreams: Upstreams): void {
    this.#upstreams = upstreams;
  }

  /**
   * One answered API request. Requests without a server (lists of all servers, requests refused before
   * authentication, which the front end records without names) count under "". Labels are bounded: a server is named
   * only when it is configured, a tool only when its server listed it; any other name the client chose counts under
   * "other", so that no client can add series at will.
   */
  record(operation: ApiOperation, status: number, seconds: number): void {
    const upstream = operation.server === null || !this.#upstreams?.has(operation.server) ? undefined : this.#upstreams.get(operation.server);
    const server = operation.server === null ? '' : (upstream?.name ?? OTHER);
    this.#requests.inc({ server, operation: operation.operation, status: String(status) });
    this.#latency.observe({ server, operation: operation.operation }, seconds);
    if (operation.operation === 'call_tool') {
      const tool = operation.name !== null && upstream?.hasListedTool(operation.name) ? operation.name : OTHER;
      this.#calls.inc({ server, tool, status: String(status) });
    }
  }

  sessionStarted(server: string, restart: boolean): void {
    if (restart) this.#restarts.inc({ server });
    else this.#restarts.inc({ server }, 0); // the series exists from the first session on
  }
}
