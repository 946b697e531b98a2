import * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { ModelType } from '../../encoder/config.ts';
import { isEncoderError } from '../../encoder/errors.ts';
import type { Predictor } from '../../encoder/predictor.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';
import {
  grpcModelMetadataOf,
  grpcPredictResponseOf,
  type GrpcModelMetadata,
  type GrpcPredictRequest,
  type GrpcPredictResponse,
} from './messages.ts';
import { grpcServiceDefinition } from './proto-text.ts';

const ENCODER_METHODS = ['Predict', 'GetModelMetadata'] as const;

/**
 * How encoder messages are decoded: enums by name, and defaults filled in so that an unset repeated field or map reads
 * as empty, not absent (proto3 `optional` fields stay absent when unset). Field names are the proto's own (the text is
 * parsed with keepCase), as in the HTTP bodies.
 */
const ENCODER_MESSAGE_SHAPE = { longs: String, enums: String, defaults: true, oneofs: false } as const;

/**
 * One set of encoder services with Predict and GetModelMetadata per model type: spec 2's `encoder.*` (messages.ts), or
 * a peer's with the same methods (encoderfile.ts). Their messages carry the predictor's field names; what differs is
 * the services' names, the fields each message has (protobuf leaves out the others) and how a request becomes the
 * predictor's body.
 */
export interface EncoderServiceFamily {
  /** Names the proto in errors. */
  label: string;
  proto: protobuf.Root;
  serviceNames: Readonly<Record<ModelType, string>>;
  /** The predictor's body for a decoded Predict request; may throw InputError. */
  predictBodyOf(modelType: ModelType, request: GrpcPredictRequest): Record<string, unknown>;
}

/** Services keyed by the model type they serve, in one parsed proto; `label` names the proto in errors. */
export interface ServiceFamily {
  label: string;
  proto: protobuf.Root;
  serviceNames: Readonly<Partial<Record<string, string>>>;
}

/** The model a server serves: its type, the service its callers are pointed to, and that service's handlers. */
export interface ServedModel<Request extends object = object> {
  modelType: string;
  /** Named by the UNIMPLEMENTED answer of every other model type's service. */
  service: string;
  /** Absent: no service of the family serves this model type (a text model's server and our image services). */
  handlers?: { Predict: grpc.handleUnaryCall<Request, object>; GetModelMetadata: grpc.handleUnaryCall<object, object> };
}

/**
 * Registers a family's services on `server`: the one of the served model type answers with its handlers, the others
 * answer every call with UNIMPLEMENTED naming the model type that is served and the service to call (grpc-js's default
 * handler would only say "not implemented", which does not tell a caller which service to use instead).
 */
export function addServices<Request extends object>(server: grpc.Server, family: ServiceFamily, served: ServedModel<Request>, metrics?: ServerMetrics): void {
  for (const [modelType, name] of Object.entries(family.serviceNames)) {
    if (name === undefined) continue;
    const service = grpcServiceDefinition(family.proto, name, ENCODER_METHODS, ENCODER_MESSAGE_SHAPE, family.label);
    const unimplemented = unimplementedHandler(name, served);
    const { Predict, GetModelMetadata } = (modelType === served.modelType ? served.handlers : undefined) ?? { Predict: unimplemented, GetModelMetadata: unimplemented };
    server.addService(service, { Predict: counted(Predict, metrics), GetModelMetadata: counted(GetModelMetadata, metrics) });
  }
}

/** A text family's services over `predictor` (addServices). */
export function addEncoderServices(server: grpc.Server, predictor: Predictor, family: EncoderServiceFamily, metrics?: ServerMetrics): void {
  const handlers = { Predict: predictHandler(predictor, family), GetModelMetadata: modelMetadataHandler(predictor) };
  addServices(server, family, { modelType: predictor.modelType, service: family.serviceNames[predictor.modelType], handlers }, metrics);
}

/** `handler`, with each call's method, status code and time recorded in `metrics` as it is answered. */
export function counted<Request, Response>(handler: grpc.handleUnaryCall<Request, Response>, metrics: ServerMetrics | undefined): grpc.handleUnaryCall<Request, Response> {
  if (!metrics) return handler;
  return (call, callback) => {
    const start = performance.now();
    handler(call, (error, ...rest) => {
      metrics.grpcRequest(call.getPath(), grpc.status[error?.code ?? grpc.status.OK], (performance.now() - start) / 1000);
      callback(error, ...rest);
    });
  };
}

function predictHandler(predictor: Predictor, family: EncoderServiceFamily): grpc.handleUnaryCall<GrpcPredictRequest, GrpcPredictResponse> {
  return (call, callback) => {
    void answer(callback, async () => grpcPredictResponseOf(await predictor.predict(family.predictBodyOf(predictor.modelType, call.request))));
  };
}

/** GetModelMetadata of a text predictor or an image pipeline. */
export function modelMetadataHandler(model: { metadata(): Parameters<typeof grpcModelMetadataOf>[0] }): grpc.handleUnaryCall<object, GrpcModelMetadata> {
  return (_call, callback) => {
    void answer(callback, async () => grpcModelMetadataOf(model.metadata()));
  };
}

function unimplementedHandler(service: string, served: Pick<ServedModel, 'modelType' | 'service'>): grpc.handleUnaryCall<object, never> {
  const details = `${service} is not served: this server serves a ${served.modelType} model; call ${served.service}`;
  return (_call, callback) => callback({ code: grpc.status.UNIMPLEMENTED, details });
}

/** Runs `work` and answers with its value or with the status of its error; the callback runs exactly once. */
export async function answer<T>(callback: grpc.sendUnaryData<T>, work: () => Promise<T>): Promise<void> {
  let value: T;
  try {
    value = await work();
  } catch (error) {
    callback(statusOf(error));
    return;
  }
  callback(null, value);
}

/**
 * Spec 2's error table: InputError → INVALID_ARGUMENT, InternalError and ConfigError → INTERNAL, with the
 * error's message. Anything else escaping the predictor is a runtime failure too, so INTERNAL.
 */
function statusOf(error: unknown): grpc.ServerErrorResponse {
  const code = isEncoderError(error) && error.kind === 'input' ? grpc.status.INVALID_ARGUMENT : grpc.status.INTERNAL;
  const message = error instanceof Error ? error.message : String(error);
  return Object.assign(new Error(message), { code, details: message });
}
