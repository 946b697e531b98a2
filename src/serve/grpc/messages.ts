import type { BuildModelType, ImageModelType, ModelType } from '../../encoder/config.ts';
import { InputError, InternalError } from '../../encoder/errors.ts';
import { checkMetadata, checkTopK, type ImageRequest } from '../../encoder/image-requests.ts';
import type {
  ModelMetadata,
  PredictResponse,
} from '../../encoder/schemas.ts';
import type { JsonOf } from '../../shared/float32-json.ts';

/**
 * Translation between spec 2's protobuf messages (as proto-loader objects: original field names, enums as
 * names, defaults filled in) and the HTTP-shaped bodies the predictor takes and returns. Field names are the
 * same on both sides; what differs is what protobuf cannot say (absent map, absent bool) and the enum.
 */

/** The package and service of each model type, as spec 2 names them. */
export const ENCODER_SERVICE_NAMES = {
  embedding: 'encoder.Embedding',
  sentence_embedding: 'encoder.SentenceEmbedding',
  sequence_classification: 'encoder.SequenceClassification',
  token_classification: 'encoder.TokenClassification',
} as const satisfies Record<ModelType, string>;

/** Our services of the image model types (proto/encoder.proto; docs/grpc-api.md, "Image models"). */
export const ENCODER_IMAGE_SERVICE_NAMES = {
  image_classification: 'encoder.ImageClassification',
  image_embedding: 'encoder.ImageEmbedding',
} as const satisfies Record<ImageModelType, string>;

export type GrpcModelType =
  | 'MODEL_TYPE_UNSPECIFIED'
  | 'EMBEDDING'
  | 'SENTENCE_EMBEDDING'
  | 'SEQUENCE_CLASSIFICATION'
  | 'TOKEN_CLASSIFICATION'
  | 'IMAGE_CLASSIFICATION'
  | 'IMAGE_EMBEDDING';

const GRPC_MODEL_TYPES = {
  embedding: 'EMBEDDING',
  sentence_embedding: 'SENTENCE_EMBEDDING',
  sequence_classification: 'SEQUENCE_CLASSIFICATION',
  token_classification: 'TOKEN_CLASSIFICATION',
  image_classification: 'IMAGE_CLASSIFICATION',
  image_embedding: 'IMAGE_EMBEDDING',
} as const satisfies Record<BuildModelType, GrpcModelType>;

/** The Predict requests as decoded (defaults filled in, except proto3 `optional` fields, which stay absent when unset); encoderfile's too. */
export interface GrpcPredictRequest {
  inputs: string[];
  /** EmbeddingRequest (a plain bool) and SentenceEmbeddingRequest (optional). */
  normalize?: boolean;
  metadata: Record<string, string>;
  /** Only in SequenceClassificationRequest. */
  pairs?: { text: string; text_pair: string }[];
}

/**
 * An image Predict request as decoded: ours (ImageClassificationRequest, ImageEmbeddingRequest) and encoderfile's
 * (ImageClassificationRequest without top_k). Bytes stay bytes; proto3 `optional` fields stay absent when unset.
 */
export interface GrpcImageRequest {
  inputs: { image: Uint8Array }[];
  metadata: Record<string, string>;
  top_k?: number;
  normalize?: boolean;
}

export interface GrpcModelMetadata {
  model_id: string;
  model_type: GrpcModelType;
  /** map<uint32, string>: proto-loader takes the keys as decimal strings. */
  id2label: Record<string, string>;
  /** "int8" when the weights were quantized at build, else empty (proto3: not on the wire). */
  quantization: string;
}

/** Any of the three Predict responses: the predictor's response with `metadata` always present (a map cannot be absent). */
export type GrpcPredictResponse = Omit<JsonOf<PredictResponse>, 'metadata'> & { metadata: Record<string, string> };

/**
 * The predictor's request body. A protobuf map cannot be absent, so an empty `metadata` map means "no metadata"
 * and is left out; `normalize` is a proto3 bool, so unset means false (HTTP's default too, as encoderfile's).
 * Validation (empty inputs, empty strings) is the predictor's, so every front end says the same thing.
 */
export function predictBodyOf(modelType: ModelType, request: GrpcPredictRequest): Record<string, unknown> {
  const pairs = request.pairs ?? [];
  if (pairs.length > 0 && request.inputs.length > 0) throw new InputError('send inputs or pairs, not both');
  const body: Record<string, unknown> = { inputs: pairs.length > 0 ? pairs.map((pair) => [pair.text, pair.text_pair]) : request.inputs };
  if (modelType === 'embedding') body.normalize = request.normalize ?? false;
  if (modelType === 'sentence_embedding' && request.normalize !== undefined) body.normalize = request.normalize;
  if (Object.keys(request.metadata).length > 0) body.metadata = request.metadata;
  return body;
}

/**
 * The image pipeline's request: each input's bytes, `top_k` and `normalize` when set (checked as HTTP checks them; a
 * `top_k` of 0 is refused, as on HTTP), and an empty metadata map as no metadata. Images are checked by the pipeline,
 * which names them `inputs[i]`.
 */
export function imageRequestOf(request: GrpcImageRequest): ImageRequest {
  const { inputs, metadata, top_k: topK, normalize } = request;
  return {
    images: inputs.map((input) => input.image),
    ...checkTopK(topK),
    ...(normalize !== undefined ? { normalize } : {}),
    ...(Object.keys(metadata).length > 0 ? checkMetadata(metadata) : {}),
  };
}

/**
 * The Predict response message. The predictor's result shapes already use the message field names; the metadata
 * map needs a value when absent, and the float vectors must be arrays (proto-loader's fromObject refuses typed
 * arrays; `repeated float` carries the same float32 values). Optional `token_info` and `predicted_label` stay absent.
 */
export function grpcPredictResponseOf(response: PredictResponse): GrpcPredictResponse;
/** An image model's response (ImagePipeline.predictImages), as well. */
export function grpcPredictResponseOf(response: { metadata?: Record<string, string> }): object;
export function grpcPredictResponseOf(response: { metadata?: Record<string, string> }): object {
  const { metadata, ...rest } = response;
  return { ...(withArrays(rest) as object), metadata: metadata ?? {} };
}

function withArrays(value: unknown): unknown {
  if (value instanceof Float32Array) {
    const numbers = new Array<number>(value.length); // a counted loop: several times faster than Array.from
    for (let i = 0; i < value.length; i++) numbers[i] = value[i];
    return numbers;
  }
  if (Array.isArray(value)) return value.map(withArrays);
  if (value !== null && typeof value === 'object') {
    const copy: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value)) copy[key] = withArrays(member);
    return copy;
  }
  return value;
}

/** GetModelMetadataResponse: the ModelType enum by name and id2label keyed by index (empty for embedding models). */
export function grpcModelMetadataOf(metadata: Omit<ModelMetadata, 'model_type'> & { model_type: BuildModelType }): GrpcModelMetadata {
  const id2label: Record<string, string> = {};
  for (const [index, label] of Object.entries(metadata.id2label ?? {})) {
    // The key becomes a uint32 on the wire; anything else would be silently mangled by the encoder.
    if (!/^\d+$/.test(index) || Number(index) > 0xffffffff) {
      throw new InternalError(`model metadata: id2label key "${index}" is not a label index (uint32)`);
    }
    id2label[index] = label;
  }
  return { model_id: metadata.model_id, model_type: GRPC_MODEL_TYPES[metadata.model_type], id2label, quantization: metadata.quantization ?? '' };
}
