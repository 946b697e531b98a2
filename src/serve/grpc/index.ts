import * as grpc from '@grpc/grpc-js';
import type { Predictor } from '../../encoder/predictor.ts';
import type { ApiKey } from '../api-key.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';
import type { RequestTracer } from '../tracing/index.ts';
import { apiKeyInterceptor } from './api-key-interceptor.ts';
import type protobuf from 'protobufjs';
import { addEncoderServices, addServices, type EncoderServiceFamily } from './encoder-services.ts';
import { encoderfileServiceFamily } from './encoderfile.ts';
import { HEALTH_SERVICE_NAME, HealthStatusBoard, healthProto } from './health.ts';
import { ENCODER_IMAGE_SERVICE_NAMES, ENCODER_SERVICE_NAMES, predictBodyOf } from './messages.ts';
import { parseProtoText } from './proto-text.ts';
import { addReflection, REFLECTION_SERVICE_NAMES } from './reflection.ts';
import { tracingInterceptor } from './tracing-interceptor.ts';

export { ENCODER_IMAGE_SERVICE_NAMES, ENCODER_SERVICE_NAMES } from './messages.ts';
export { ENCODERFILE_SERVICE_NAMES } from './encoderfile.ts';

export interface GrpcServerOptions {
  /** The text of proto/encoder.proto: read from disk when running from source, from a SEA asset in the executable. */
  protoText: string;
  /** Where calls of the encoder services, and calls refused for the API key, are counted. */
  metrics?: ServerMetrics;
  /** The key every call but health's must carry in its `authorization` metadata; none: every call is answered. */
  apiKey?: ApiKey;
  /** The largest request message; larger ones are RESOURCE_EXHAUSTED. None: grpc-js's default (4 MiB). */
  maxMessageBytes?: number;
  /** Traces every call but health's and reflection's (`serve --enable-otel`). */
  tracer?: RequestTracer;
}

/** The gRPC front end: a server not yet bound (the caller binds it), and its health status. */
export interface GrpcFrontEnd {
  server: grpc.Server;
  /** What the server answers: the model type's encoder service and encoderfile's, health, reflection v1 and v1alpha. */
  services: string[];
  /**
   * Health status of "" and of the two encoder services. `false` (at shutdown, before `tryShutdown`) also ends open
   * Watch streams, which would otherwise keep a graceful shutdown waiting.
   */
  setServing(serving: boolean): void;
}

/**
 * Spec 2's gRPC interface over one predictor: encoder.Embedding, encoder.SentenceEmbedding,
 * encoder.SequenceClassification and encoder.TokenClassification (only the model type's answers; the others, and our
 * image services, say UNIMPLEMENTED); beside them mozilla-ai/encoderfile's `encoderfile.<type>.<Type>Inference`
 * services on the same predictor (encoderfile.ts), so that encoderfile's clients call it unchanged; plus
 * grpc.health.v1.Health and server reflection so that grpcurl and grpc_cli can list and call it. Image models have
 * their own server (image-services.ts).
 * A `protoText` that does not parse or lacks a service or method is a ConfigError.
 */
export function createGrpcServer(predictor: Predictor, options: GrpcServerOptions): GrpcFrontEnd {
  const encoderProto = parseProtoText(options.protoText, 'encoder.proto');
  const families: EncoderServiceFamily[] = [
    { label: 'encoder.proto', proto: encoderProto, serviceNames: ENCODER_SERVICE_NAMES, predictBodyOf },
    encoderfileServiceFamily(),
  ];
  const servedServices = families.map((family) => family.serviceNames[predictor.modelType]);
  const server = newGrpcServer(options);
  for (const family of families) addEncoderServices(server, predictor, family, options.metrics);
  // our image services, none of which a text model serves: UNIMPLEMENTED naming the service to call
  const unserved = { modelType: predictor.modelType, service: ENCODER_SERVICE_NAMES[predictor.modelType] };
  addServices(server, { label: 'encoder.proto', proto: encoderProto, serviceNames: ENCODER_IMAGE_SERVICE_NAMES }, unserved, options.metrics);
  return withHealthAndReflection(server, families.map((family) => family.proto), servedServices);
}

/** A gRPC server with the options' interceptors (traced first, so that a call refused for its key is traced too) and message limit. */
export function newGrpcServer(options: Omit<GrpcServerOptions, 'protoText'>): grpc.Server {
  return new grpc.Server({
    interceptors: [...(options.tracer ? [tracingInterceptor(options.tracer)] : []), ...(options.apiKey ? [apiKeyInterceptor(options.apiKey, options.metrics)] : [])],
    ...(options.maxMessageBytes !== undefined ? { 'grpc.max_receive_message_length': options.maxMessageBytes } : {}),
  });
}

/**
 * `server` with health (SERVING for "" and the served services) and reflection (describing `protos` and health; the
 * services that only say UNIMPLEMENTED are left out of list_services, their symbols still resolve).
 */
export function withHealthAndReflection(server: grpc.Server, protos: readonly protobuf.Root[], servedServices: readonly string[]): GrpcFrontEnd {
  const healthServiceProto = healthProto();
  const health = new HealthStatusBoard([...servedServices]);
  health.addTo(server, healthServiceProto);
  const services = [...servedServices, HEALTH_SERVICE_NAME, ...REFLECTION_SERVICE_NAMES];
  addReflection(server, [...protos, healthServiceProto], services);
  return { server, services, setServing: (serving) => health.setServing(serving) };
}
