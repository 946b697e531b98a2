import * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { ModelType } from '../../encoder/config.ts';
import { isEncoderError } from '../../encoder/errors.ts';
import type { Predictor } from '../../encoder/predict-pipeline.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';
import {
  ENCODER_SERVICE_NAMES,
  grpcModelMetadataOf,
  grpcPredictResponseOf,
  predictBodyOf,
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
const MODEL_TYPES = Object.keys(ENCODER_SERVICE_NAMES) as ModelType[];

/**
 * Registers spec 2's three services on `server`: the one of the predictor's model type answers, the other two
 * answer every call with UNIMPLEMENTED naming the model type that is served (grpc-js's default handler would
 * only say "not implemented", which does not tell a caller which service to use instead).
 */
export function addEncoderServices(server: grpc.Server, predictor: Predictor, proto: protobuf.Root, label: string, metrics?: ServerMetrics): void {
  for (const modelType of MODEL_TYPES) {
    const service = grpcServiceDefinition(proto, ENCODER_SERVICE_NAMES[modelType], ENCODER_METHODS, ENCODER_MESSAGE_SHAPE, label);
    if (modelType === predictor.modelType) {
      server.addService(service, {
        Predict: counted(predictHandler(predictor), metrics),
        GetModelMetadata: counted(modelMetadataHandler(predictor), metrics),
      });
    } else {
      const unimplemented = counted(unimplementedHandler(ENCODER_SERVICE_NAMES[modelType], predictor.modelType), metrics);
      server.addService(service, { Predict: unimplemented, GetModelMetadata: unimplemented });
    }
  }
}

/** `handler`, with each call's method, status code and time recorded in `metrics` as it is answered. */
function counted<Request, Response>(handler: grpc.handleUnaryCall<Request, Response>, metrics: ServerMetrics | undefined): grpc.handleUnaryCall<Request, Response> {
  if (!metrics) return handler;
  return (call, callback) => {
    const start = performance.now();
    handler(call, (error, ...rest) => {
      metrics.grpcRequest(call.getPath(), grpc.status[error?.code ?? grpc.status.OK], (performance.now() - start) / 1000);
      callback(error, ...rest);
    });
  };
}

function predictHandler(predictor: Predictor): grpc.handleUnaryCall<GrpcPredictRequest, GrpcPredictResponse> {
  return (call, callback) => {
    void answer(callback, async () => grpcPredictResponseOf(await predictor.predict(predictBodyOf(predictor.modelType, call.request))));
  };
}

function modelMetadataHandler(predictor: Predictor): grpc.handleUnaryCall<object, GrpcModelMetadata> {
  return (_call, callback) => {
    void answer(callback, async () => grpcModelMetadataOf(predictor.metadata()));
  };
}

function unimplementedHandler(service: string, served: ModelType): grpc.handleUnaryCall<object, never> {
  const details = `${service} is not served: this server serves a ${served} model; call ${ENCODER_SERVICE_NAMES[served]}`;
  return (_call, callback) => callback({ code: grpc.status.UNIMPLEMENTED, details });
}

/** Runs `work` and answers with its value or with the status of its error; the callback runs exactly once. */
async function answer<T>(callback: grpc.sendUnaryData<T>, work: () => Promise<T>): Promise<void> {
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
