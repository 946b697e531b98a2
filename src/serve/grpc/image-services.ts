/**
 * gRPC of an image model: our `encoder.ImageClassification` and `encoder.ImageEmbedding` (proto/encoder.proto; the
 * served model type's answers, the other and the text services say UNIMPLEMENTED), and for a classifier mozilla-ai/
 * encoderfile 0.7's `encoderfile.image_classification.ImageClassificationInference` (Predict, GetModelMetadata) with
 * its messages as encoderfile publishes them (image_classification.proto, image_types.proto: each image's bytes in
 * `ImageInput.image`); encoderfile has no image embedding service. All over the image pipeline, with
 * grpc.health.v1.Health and reflection as for text models. Scores are the pipeline's (softmax, best first), vectors
 * normalised as on HTTP (docs/image-models.md). Errors: an image that cannot be decoded is INVALID_ARGUMENT naming
 * `inputs[i]`.
 */
import type * as grpc from '@grpc/grpc-js';
import type { ImagePipeline } from '../../encoder/image-pipeline.ts';
import { addServices, answer, modelMetadataHandler, type ServedModel } from './encoder-services.ts';
import { ENCODERFILE_METADATA_PROTO } from './encoderfile.ts';
import { newGrpcServer, withHealthAndReflection, type GrpcFrontEnd, type GrpcServerOptions } from './index.ts';
import { ENCODER_IMAGE_SERVICE_NAMES, ENCODER_SERVICE_NAMES, grpcPredictResponseOf, imageRequestOf, type GrpcImageRequest } from './messages.ts';
import { parseProtoText } from './proto-text.ts';

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
  rpc Predict(ImageClassificationRequest) returns (ImageClassificationResponse);
  rpc GetModelMetadata(encoderfile.metadata.GetModelMetadataRequest) returns (encoderfile.metadata.GetModelMetadataResponse);
}
message ImageClassificationRequest {
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

export function createImageGrpcServer(pipeline: ImagePipeline, options: GrpcServerOptions): GrpcFrontEnd {
  const encoderProto = parseProtoText(options.protoText, 'encoder.proto');
  const encoderfileProto = parseProtoText(ENCODERFILE_IMAGE_PROTO_TEXTS, LABEL);
  const predict: grpc.handleUnaryCall<GrpcImageRequest, object> = (call, callback) => {
    void answer(callback, async () => grpcPredictResponseOf(await pipeline.predictImages(imageRequestOf(call.request))));
  };
  // encoderfile's messages have no top_k, normalize or model_id: the same handlers answer both (protobuf leaves out the fields a message lacks)
  const served: ServedModel<GrpcImageRequest> = {
    modelType: pipeline.modelType,
    service: ENCODER_IMAGE_SERVICE_NAMES[pipeline.modelType],
    handlers: { Predict: predict, GetModelMetadata: modelMetadataHandler(pipeline) },
  };
  const server = newGrpcServer(options);
  addServices(server, { label: 'encoder.proto', proto: encoderProto, serviceNames: ENCODER_IMAGE_SERVICE_NAMES }, served, options.metrics);
  addServices(server, { label: LABEL, proto: encoderfileProto, serviceNames: { image_classification: IMAGE_CLASSIFICATION_SERVICE } }, served, options.metrics);
  addServices(server, { label: 'encoder.proto', proto: encoderProto, serviceNames: ENCODER_SERVICE_NAMES }, { modelType: served.modelType, service: served.service }, options.metrics);
  const servedServices = [served.service, ...(pipeline.modelType === 'image_classification' ? [IMAGE_CLASSIFICATION_SERVICE] : [])];
  return withHealthAndReflection(server, [encoderProto, encoderfileProto], servedServices);
}
