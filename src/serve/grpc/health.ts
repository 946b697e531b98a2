import * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import { grpcServiceDefinition, parseProtoText } from './proto-text.ts';

/**
 * grpc.health.v1.Health, written here rather than taken from grpc-health-check: that package loads its .proto
 * file from its own folder when it is imported, which a bundled single executable does not have. The text below
 * is the package's health/v1/health.proto (grpc-health-check 2.1.0) without its comments.
 */
export const HEALTH_SERVICE_NAME = 'grpc.health.v1.Health';

const HEALTH_PROTO = `syntax = "proto3";
package grpc.health.v1;
message HealthListRequest {}
message HealthListResponse {
  map<string, HealthCheckResponse> statuses = 1;
}
message HealthCheckRequest {
  string service = 1;
}
message HealthCheckResponse {
  enum ServingStatus {
    UNKNOWN = 0;
    SERVING = 1;
    NOT_SERVING = 2;
    SERVICE_UNKNOWN = 3;
  }
  ServingStatus status = 1;
}
service Health {
  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);
  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);
  rpc List(HealthListRequest) returns (HealthListResponse);
}
`;

const HEALTH_LABEL = 'the health service proto';

/** The health service's proto: for the service, and for reflection to describe. */
export function healthProto(): protobuf.Root {
  return parseProtoText(HEALTH_PROTO, HEALTH_LABEL);
}

type ServingStatus = 'SERVING' | 'NOT_SERVING';
type WatchStatus = ServingStatus | 'SERVICE_UNKNOWN';

interface HealthCheckRequest {
  service: string;
}

interface HealthCheckResponse {
  status: WatchStatus;
}

/**
 * The serving status of "" (the whole server) and of each named service, answered by Check, Watch and List.
 * Names not given here are unknown: Check says NOT_FOUND, Watch says SERVICE_UNKNOWN, as the health protocol asks.
 */
export class HealthStatusBoard {
  readonly #statuses = new Map<string, ServingStatus>();
  readonly #watches = new Set<grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>>();

  constructor(serviceNames: readonly string[]) {
    for (const name of ['', ...serviceNames]) this.#statuses.set(name, 'SERVING');
  }

  /**
   * Sets every known name to SERVING or NOT_SERVING and tells the watchers. Going NOT_SERVING also ends every
   * Watch stream (after its NOT_SERVING message) with OK: a graceful shutdown waits for open calls, and a
   * watcher never hangs up by itself. The protocol tells clients to retry after a stream ends.
   */
  setServing(serving: boolean): void {
    const status: ServingStatus = serving ? 'SERVING' : 'NOT_SERVING';
    for (const name of this.#statuses.keys()) this.#statuses.set(name, status);
    for (const watch of this.#watches) {
      const current = this.#statuses.get(watch.request.service);
      if (current !== undefined) watch.write({ status: current });
      if (!serving) this.#endWatch(watch);
    }
  }

  addTo(server: grpc.Server, proto: protobuf.Root): void {
    const definition = grpcServiceDefinition(proto, HEALTH_SERVICE_NAME, ['Check', 'Watch', 'List'], { enums: String, defaults: true }, HEALTH_LABEL);
    server.addService(definition, {
      Check: this.#check,
      Watch: this.#watch,
      List: this.#list,
    });
  }

  readonly #check: grpc.handleUnaryCall<HealthCheckRequest, HealthCheckResponse> = (call, callback) => {
    const status = this.#statuses.get(call.request.service);
    if (status === undefined) {
      callback({ code: grpc.status.NOT_FOUND, details: `unknown service "${call.request.service}"` });
    } else {
      callback(null, { status });
    }
  };

  readonly #watch: grpc.handleServerStreamingCall<HealthCheckRequest, HealthCheckResponse> = (call) => {
    this.#watches.add(call);
    call.on('cancelled', () => this.#watches.delete(call));
    call.write({ status: this.#statuses.get(call.request.service) ?? 'SERVICE_UNKNOWN' });
    // Already shutting down: say so once and hang up rather than hold the shutdown open.
    if (this.#statuses.get('') === 'NOT_SERVING') this.#endWatch(call);
  };

  readonly #list: grpc.handleUnaryCall<object, { statuses: Record<string, HealthCheckResponse> }> = (_call, callback) => {
    const statuses = Object.fromEntries([...this.#statuses].map(([name, status]) => [name, { status }]));
    callback(null, { statuses });
  };

  #endWatch(watch: grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>): void {
    this.#watches.delete(watch);
    watch.end();
  }
}
