import * as grpc from '@grpc/grpc-js';
import { API_KEY_MESSAGES, type ApiKey } from '../api-key.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';
import { HEALTH_SERVICE_NAME } from './health.ts';

/**
 * Refuses every call without the API key in its `authorization` metadata (`Bearer <key>`) with UNAUTHENTICATED,
 * before the handler runs, except the health service's: load balancers and probes check it without credentials.
 * Refusals are counted in `metrics` like the calls the handlers answer.
 */
export function apiKeyInterceptor(apiKey: ApiKey, metrics?: ServerMetrics): grpc.ServerInterceptor {
  const open = `/${HEALTH_SERVICE_NAME}/`;
  return (method, call) => {
    if (method.path.startsWith(open)) return new grpc.ServerInterceptingCall(call);
    const start = performance.now();
    const listener = new grpc.ServerListenerBuilder()
      .withOnReceiveMetadata((metadata, next) => {
        const values = metadata.get('authorization');
        const refusal = values.length > 1 ? 'invalid' : apiKey.refusalOf(values[0]?.toString());
        if (refusal === null) return next(metadata);
        call.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: API_KEY_MESSAGES[refusal] });
        metrics?.grpcRequest(method.path, 'UNAUTHENTICATED', (performance.now() - start) / 1000);
      })
      .build();
    return new grpc.ServerInterceptingCall(call, new grpc.ResponderBuilder().withStart((next) => next(listener)).build());
  };
}
