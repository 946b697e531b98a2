import * as grpc from '@grpc/grpc-js';
import { requestPhases } from '../../encoder/request-phases.ts';
import type { RequestTracer, ServerSpan } from '../tracing/index.ts';
import { HEALTH_SERVICE_NAME } from './health.ts';
import { REFLECTION_SERVICE_NAMES } from './reflection.ts';

/** Health checks and reflection are not traced: probes would drown the calls that matter. */
const UNTRACED_SERVICES = [HEALTH_SERVICE_NAME, ...REFLECTION_SERVICE_NAMES].map((service) => `/${service}/`);

/**
 * One SERVER span per call (`serve --enable-otel`), named as OpenTelemetry's RPC conventions say
 * ("encoder.Embedding/Predict"), child of the caller's `traceparent` metadata; it ends with the call's status. The
 * handler runs in an async context that holds the span's phase recorder (request-phases.ts).
 */
export function tracingInterceptor(tracer: RequestTracer): grpc.ServerInterceptor {
  return (method, call) => {
    if (UNTRACED_SERVICES.some((prefix) => method.path.startsWith(prefix))) return new grpc.ServerInterceptingCall(call);
    let span: ServerSpan | undefined;
    const inSpan = (next: () => void) => (span ? requestPhases.run(span.phases, next) : next());
    const listener = new grpc.ServerListenerBuilder()
      .withOnReceiveMetadata((metadata, next) => {
        const [service, rpc] = method.path.slice(1).split('/');
        const value = (name: string) => {
          const first = metadata.get(name)[0];
          return first === undefined ? undefined : first.toString();
        };
        span = tracer.startRequest(method.path.slice(1), value, { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': rpc });
        next(metadata);
      })
      // grpc-js calls a unary handler when the request has fully arrived, and a streaming one with its first message
      .withOnReceiveMessage((message, next) => inSpan(() => next(message)))
      .withOnReceiveHalfClose((next) => inSpan(next))
      .build();
    const responder = new grpc.ResponderBuilder()
      .withStart((next) => next(listener))
      .withSendStatus((status, next) => {
        span?.end({ 'rpc.grpc.status_code': status.code }, status.code === grpc.status.OK ? undefined : `${grpc.status[status.code]}: ${status.details}`);
        span = undefined;
        next(status);
      })
      .build();
    return new grpc.ServerInterceptingCall(call, responder);
  };
}
