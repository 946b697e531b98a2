import * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { ModelType } from '../../encoder/config.ts';
import { isEncoderError } from '../../encoder/errors.ts';
import type { Predictor } from '../../encoder/predict-pipeline.ts';
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

/**
 * Registers a family's services on `server`: the one of the predictor's model type answers, the others answer every
 * call with UNIMPLEMENTED naming the model type that is served (grpc-js's default handler would only say "not
 * implemented", which does not tell a caller which service to use instead).
 */
export function addEncoderServices(server: grpc.Server, predictor: Predictor, family: EncoderServiceFamily, metrics?: ServerMetrics): void {
  for (const modelType of Object.keys(family.serviceNames) as ModelType[]) {
    const name = family.serviceNames[modelType];
    const service = grpcServiceDefinition(family.proto, name, ENCODER_METHODS, ENCODER_MESSAGE_SHAPE, family.label);
    if (modelType === predictor.modelType) {
      server.addService(service, {
        Predict: counted(predictHandler(predictor, family), metrics),
        GetModelMetadata: counted(modelMetadataHandler(predictor), metrics),
      });
    } else {
      const unimplemented = counted(unimplementedHandler(name, predictor.modelType, family.serviceNames[predictor.modelType]), metrics);
      server.addService(service, { Predict: unimplemented, GetModelMetadata: unimplemented });
    }
  }
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

function modelMetadataHandler(predictor: Predictor): grpc.handleUnaryCall<object, GrpcModelMetadata> {
  return (_call, callback) => {
    void answer(callback, async () => grpcModelMetadataOf(predictor.metadata()));
  };
}

function unimplementedHandler(service: string, served: ModelType, servedService: string): grpc.handleUnaryCall<object, never> {
  const details = `${service} is not served: this server serves a ${served} model; call ${servedService}`;
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
