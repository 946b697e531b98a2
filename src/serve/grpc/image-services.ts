/**
 * gRPC of an image classification model: mozilla-ai/encoderfile 0.7's `encoderfile.image_classification.
 * ImageClassificationInference` (Predict, GetModelMetadata), its messages as encoderfile publishes them
 * (image_classification.proto, image_types.proto: each image's bytes in `ImageInput.image`), over the image pipeline;
 * with grpc.health.v1.Health and reflection as for text models. Scores are the pipeline's (softmax, best first), as
 * on HTTP (docs/image-models.md). Errors: an image that cannot be decoded is INVALID_ARGUMENT naming `inputs[i]`.
 */
import * as grpc from '@grpc/grpc-js';
import type { ImagePipeline } from '../../encoder/image-pipeline.ts';
import { checkMetadata } from '../../encoder/image-requests.ts';
import { apiKeyInterceptor } from './api-key-interceptor.ts';
import { answer, counted } from './encoder-services.ts';
import { ENCODERFILE_METADATA_PROTO } from './encoderfile.ts';
import type { GrpcFrontEnd, GrpcServerOptions } from './index.ts';
import { HEALTH_SERVICE_NAME, HealthStatusBoard, healthProto } from './health.ts';
import { grpcServiceDefinition, parseProtoText } from './proto-text.ts';
import { addReflection, REFLECTION_SERVICE_NAMES } from './reflection.ts';
import { tracingInterceptor } from './tracing-interceptor.ts';

export const IMAGE_CLASSIFICATION_SERVICE = 'encoderfile.image_classification.ImageClassificationInference';

const ENCODERFILE_IMAGE_PROTO_TEXTS = [
  ENCODERFILE_METADATA_PROTO,
  `syntax = "proto3";
package encoderfile.image_types;
message ImageInput {
  bytes image = 1;
}
message ImageLabelScore {
  string label = 1;
  optional float score = 2;
}
message ImageLabels {
  repeated ImageLabelScore labels = 1;
}
`,
  `syntax = "proto3";
package encoderfile.image_classification;
service ImageClassificationInference {
  rpc Predict(ImageRequest) returns (ImageClassificationResponse);
  rpc GetModelMetadata(encoderfile.metadata.GetModelMetadataRequest) returns (encoderfile.metadata.GetModelMetadataResponse);
}
message ImageRequest {
  repeated encoderfile.image_types.ImageInput inputs = 1;
  map<string, string> metadata = 11;
}
message ImageClassificationResponse {
  repeated encoderfile.image_types.ImageLabels results = 1;
  map<string, string> metadata = 11;
}
`,
];

const LABEL = "encoderfile's image protos";
/** Bytes stay bytes (a Buffer), unset repeated fields and maps read as empty. */
const IMAGE_MESSAGE_SHAPE = { longs: String, enums: String, defaults: true, oneofs: false } as const;

interface ImageRequestMessage {
  inputs: { image: Uint8Array }[];
  metadata: Record<string, string>;
}

export function createImageGrpcServer(pipeline: ImagePipeline, options: Omit<GrpcServerOptions, 'protoText'>): GrpcFrontEnd {
  const proto = parseProtoText(ENCODERFILE_IMAGE_PROTO_TEXTS, LABEL);
  const services = [IMAGE_CLASSIFICATION_SERVICE, HEALTH_SERVICE_NAME, ...REFLECTION_SERVICE_NAMES];
  const server = new grpc.Server({
    interceptors: [...(options.tracer ? [tracingInterceptor(options.tracer)] : []), ...(options.apiKey ? [apiKeyInterceptor(options.apiKey, options.metrics)] : [])],
    ...(options.maxMessageBytes !== undefined ? { 'grpc.max_receive_message_length': options.maxMessageBytes } : {}),
  });
  const service = grpcServiceDefinition(proto, IMAGE_CLASSIFICATION_SERVICE, ['Predict', 'GetModelMetadata'], IMAGE_MESSAGE_SHAPE, LABEL);
  const predict: grpc.handleUnaryCall<ImageRequestMessage, object> = (call, callback) => {
    void answer(callback, async () => {
      const { inputs, metadata } = call.request;
      const given = Object.keys(metadata).length > 0 ? checkMetadata(metadata) : {};
      const response = await pipeline.predictImages({ images: inputs.map((input) => input.image), ...given });
      return { results: response.results, metadata: response.metadata ?? {} };
    });
  };
  const modelMetadata: grpc.handleUnaryCall<object, object> = (_call, callback) => {
    void answer(callback, async () => ({ model_id: pipeline.modelId, model_type: 'IMAGE_CLASSIFICATION', id2label: pipeline.metadata().id2label }));
  };
  server.addService(service, { Predict: counted(predict, options.metrics), GetModelMetadata: counted(modelMetadata, options.metrics) });
  const healthServiceProto = healthProto();
  const health = new HealthStatusBoard([IMAGE_CLASSIFICATION_SERVICE]);
  health.addTo(server, healthServiceProto);
  addReflection(server, [proto, healthServiceProto], services);
  return { server, services, setServing: (serving) => health.setServing(serving) };
}
