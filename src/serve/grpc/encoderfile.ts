import type protobuf from 'protobufjs';
import type { ModelType } from '../../encoder/config.ts';
import type { EncoderServiceFamily } from './encoder-services.ts';
import { predictBodyOf } from './messages.ts';
import { parseProtoText } from './proto-text.ts';

/**
 * mozilla-ai/encoderfile 0.7.0's gRPC services, served beside spec 2's `encoder.*` over the same predictor (design
 * decision 11), so that clients generated from encoderfile's .proto files call this server unchanged. The texts below
 * describe encoderfile's wire format: its packages, service and message names and field numbers, one package per text
 * as encoderfile splits them into files. What differs from spec 2's messages: no `normalize` in any request (an
 * embedding is answered unnormalised, as encoderfile does without a transform), no `pairs`, the per-token message of
 * token classification without `logits` (scores = 2, label = 3, score = 4), and GetModelMetadataResponse without
 * `quantization`. Image classification has its own service over the image pipeline (image-services.ts).
 */
/** encoderfile's metadata package, which its image services (image-services.ts) use too. */
export const ENCODERFILE_METADATA_PROTO = `syntax = "proto3";
package encoderfile.metadata;
enum ModelType {
  MODEL_TYPE_UNSPECIFIED = 0;
  EMBEDDING = 1;
  SEQUENCE_CLASSIFICATION = 2;
  TOKEN_CLASSIFICATION = 3;
  SENTENCE_EMBEDDING = 4;
  IMAGE_CLASSIFICATION = 21;
}
message GetModelMetadataRequest {}
message GetModelMetadataResponse {
  string model_id = 1;
  ModelType model_type = 2;
  map<uint32, string> id2label = 3;
}
`;

const ENCODERFILE_PROTO_TEXTS = [
  ENCODERFILE_METADATA_PROTO,
  `syntax = "proto3";
package encoderfile.token;
message TokenInfo {
  string token = 1;
  uint32 token_id = 2;
  uint32 start = 3;
  uint32 end = 4;
}
`,
  `syntax = "proto3";
package encoderfile.embedding;
message EmbeddingRequest {
  repeated string inputs = 1;
  map<string, string> metadata = 3;
}
message TokenEmbedding {
  repeated float embedding = 1;
  encoderfile.token.TokenInfo token_info = 2;
}
message TokenEmbeddingSequence {
  repeated TokenEmbedding embeddings = 1;
}
message EmbeddingResponse {
  repeated TokenEmbeddingSequence results = 1;
  string model_id = 2;
  map<string, string> metadata = 3;
}
service EmbeddingInference {
  rpc Predict(EmbeddingRequest) returns (EmbeddingResponse);
  rpc GetModelMetadata(encoderfile.metadata.GetModelMetadataRequest) returns (encoderfile.metadata.GetModelMetadataResponse);
}
`,
  `syntax = "proto3";
package encoderfile.sentence_embedding;
message SentenceEmbeddingRequest {
  repeated string inputs = 1;
  map<string, string> metadata = 3;
}
message SentenceEmbedding {
  repeated float embedding = 1;
}
message SentenceEmbeddingResponse {
  repeated SentenceEmbedding results = 1;
  string model_id = 2;
  map<string, string> metadata = 3;
}
service SentenceEmbeddingInference {
  rpc Predict(SentenceEmbeddingRequest) returns (SentenceEmbeddingResponse);
  rpc GetModelMetadata(encoderfile.metadata.GetModelMetadataRequest) returns (encoderfile.metadata.GetModelMetadataResponse);
}
`,
  `syntax = "proto3";
package encoderfile.sequence_classification;
message SequenceClassificationRequest {
  repeated string inputs = 1;
  map<string, string> metadata = 2;
}
message SequenceClassificationResult {
  repeated float logits = 1;
  repeated float scores = 2;
  uint32 predicted_index = 3;
  optional string predicted_label = 4;
}
message SequenceClassificationResponse {
  repeated SequenceClassificationResult results = 1;
  string model_id = 2;
  map<string, string> metadata = 3;
}
service SequenceClassificationInference {
  rpc Predict(SequenceClassificationRequest) returns (SequenceClassificationResponse);
  rpc GetModelMetadata(encoderfile.metadata.GetModelMetadataRequest) returns (encoderfile.metadata.GetModelMetadataResponse);
}
`,
  `syntax = "proto3";
package encoderfile.token_classification;
message TokenClassificationRequest {
  repeated string inputs = 1;
  map<string, string> metadata = 2;
}
message TokenClassification {
  encoderfile.token.TokenInfo token_info = 1;
  repeated float scores = 2;
  string label = 3;
  float score = 4;
}
message TokenClassificationResult {
  repeated TokenClassification tokens = 1;
}
message TokenClassificationResponse {
  repeated TokenClassificationResult results = 1;
  string model_id = 2;
  map<string, string> metadata = 3;
}
service TokenClassificationInference {
  rpc Predict(TokenClassificationRequest) returns (TokenClassificationResponse);
  rpc GetModelMetadata(encoderfile.metadata.GetModelMetadataRequest) returns (encoderfile.metadata.GetModelMetadataResponse);
}
`,
];

/** encoderfile's service of each model type. */
export const ENCODERFILE_SERVICE_NAMES = {
  embedding: 'encoderfile.embedding.EmbeddingInference',
  sentence_embedding: 'encoderfile.sentence_embedding.SentenceEmbeddingInference',
  sequence_classification: 'encoderfile.sequence_classification.SequenceClassificationInference',
  token_classification: 'encoderfile.token_classification.TokenClassificationInference',
} as const satisfies Record<ModelType, string>;

const LABEL = "encoderfile's protos";

/** encoderfile's packages, parsed into one root (their cross-package references resolve there). */
export function encoderfileProto(): protobuf.Root {
  return parseProtoText(ENCODERFILE_PROTO_TEXTS, LABEL);
}

/**
 * encoderfile's services. Their requests decode as ours do without `normalize` and `pairs`, so spec 2's translation
 * applies as it is: an embedding model answers its vectors unnormalised (normalize false, what encoderfile answers
 * without a transform), a sentence_embedding model as the model is set up; an empty metadata map means no metadata.
 */
export function encoderfileServiceFamily(proto: protobuf.Root = encoderfileProto()): EncoderServiceFamily {
  return { label: LABEL, proto, serviceNames: ENCODERFILE_SERVICE_NAMES, predictBodyOf };
}
