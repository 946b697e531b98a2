import type { ModelType } from './config.ts';
import { labelsOf, type ModelPackage } from './model-package.ts';
import { OnnxModel, type ModelSignature } from './onnx-model.ts';
import { parsePredictRequest } from './requests.ts';
import { embeddingResult, sequenceClassificationResult, tokenClassificationResult } from './results.ts';
import type {
  EmbeddingRequest,
  EmbeddingResponse,
  ModelMetadata,
  PredictRequest,
  PredictResponse,
  SequenceClassificationResponse,
  TokenClassificationResponse,
} from './schemas.ts';
import { softmax, Tensor } from './tensor.ts';
import { EncoderTokenizer, type Encoding } from './tokenizer/index.ts';
import { checkTransform, LuaTransform } from './transform/index.ts';

export interface PipelineOptions {
  /** onnxruntime intra-op threads; default: onnxruntime's choice (all cores). */
  threads?: number;
  /** Largest number of sequences in one onnxruntime run. */
  maxBatchSequences?: number;
  /** wasmoon's glue.wasm, when it is not beside the wasmoon package (single executable). */
  luaWasmPath?: string;
}

const DEFAULT_MAX_BATCH_SEQUENCES = 32;

/**
 * The one path from a request body to spec 2's response: validate, tokenize, run onnxruntime, apply the Lua
 * transform, shape the result. Every front end (CLI, HTTP, gRPC, MCP) calls `predict`.
 */
export class PredictPipeline {
  readonly modelId: string;
  readonly modelType: ModelType;
  readonly tokenizer: EncoderTokenizer;
  /** Things the user should know about how the model was bound (e.g. a fallback output). */
  readonly notes: readonly string[];
  readonly #model: OnnxModel;
  readonly #transform: LuaTransform | null;
  readonly #labels: ReadonlyMap<number, string>;
  readonly #maxBatchSequences: number;

  private constructor(fields: {
    pkg: ModelPackage;
    tokenizer: EncoderTokenizer;
    model: OnnxModel;
    transform: LuaTransform | null;
    maxBatchSequences: number;
  }) {
    this.modelId = fields.pkg.name;
    this.modelType = fields.pkg.modelType;
    this.tokenizer = fields.tokenizer;
    this.#model = fields.model;
    this.#transform = fields.transform;
    this.#labels = labelsOf(fields.pkg.modelConfig);
    this.#maxBatchSequences = fields.maxBatchSequences;
    this.notes = fields.model.signature.note ? [fields.model.signature.note] : [];
  }

  /** Loads tokenizer, model and transform; every problem is a ConfigError. */
  static async load(pkg: ModelPackage, options: PipelineOptions = {}): Promise<PredictPipeline> {
    const tokenizer = EncoderTokenizer.fromJson(pkg.tokenizerJson, pkg.tokenizerConfig);
    const model = await OnnxModel.load(pkg.weights, pkg.modelType, { threads: options.threads });
    let transform: LuaTransform | null = null;
    try {
      if (pkg.transform !== null) {
        const settings = { libs: pkg.luaLibs, modelType: pkg.modelType, wasmPath: options.luaWasmPath };
        // Run it once on a small output of the model's shape, so a broken script fails at load, not per request.
        await checkTransform(pkg.transform, { ...settings, outputDims: sampleOutputDims(model.signature, pkg) });
        transform = await LuaTransform.create(pkg.transform, settings);
      }
    } catch (error) {
      await model.close();
      throw error;
    }
    return new PredictPipeline({
      pkg,
      tokenizer,
      model,
      transform,
      maxBatchSequences: options.maxBatchSequences ?? DEFAULT_MAX_BATCH_SEQUENCES,
    });
  }

  /** How the model was bound: inputs, and the output read. */
  get signature(): ModelSignature {
    return this.#model.signature;
  }

  metadata(): ModelMetadata {
    const metadata: ModelMetadata = { model_id: this.modelId, model_type: this.modelType };
    if (this.modelType !== 'embedding') {
      metadata.id2label = Object.fromEntries([...this.#labels].map(([index, label]) => [String(index), label]));
    }
    return metadata;
  }

  /** Validates the body (InputError) and returns the model type's response; runtime failures are InternalError. */
  async predict(body: unknown): Promise<PredictResponse> {
    const request = parsePredictRequest(this.modelType, body);
    const encodings = this.tokenizer.encodeBatch(request.inputs);
    const results = new Array<PredictResponse['results'][number]>(encodings.length);

    for (const chunk of this.#chunksBySimilarLength(encodings)) {
      const batch = this.tokenizer.pad(chunk.map((index) => encodings[index]));
      let output = await this.#model.run(batch);
      if (this.#transform) {
        const mask = new Tensor(Float32Array.from(batch.attentionMask, Number), [batch.batchSize, batch.sequenceLength]);
        output = await this.#transform.run(output, mask);
      }
      this.#shape(request, output, chunk, encodings, results);
    }

    const response = { results, model_id: this.modelId } as PredictResponse;
    if (request.metadata !== undefined) response.metadata = request.metadata;
    return response;
  }

  async close(): Promise<void> {
    this.#transform?.close();
    await this.#model.close();
  }

  #shape(
    request: PredictRequest,
    output: Tensor,
    chunk: readonly number[],
    encodings: readonly Encoding[],
    results: PredictResponse['results'][number][],
  ): void {
    switch (this.modelType) {
      case 'embedding': {
        const { normalize } = request as EmbeddingRequest;
        chunk.forEach((index, row) => {
          (results as EmbeddingResponse['results'])[index] = embeddingResult(output, row, encodings[index], normalize);
        });
        return;
      }
      case 'sequence_classification': {
        const scores = softmax(output, -1);
        // predicted_label only when the model has label mappings at all (spec 2)
        const labels = this.#labels.size > 0 ? this.#labels : null;
        chunk.forEach((index, row) => {
          (results as SequenceClassificationResponse['results'])[index] = sequenceClassificationResult(output, scores, row, labels);
        });
        return;
      }
      case 'token_classification': {
        const scores = softmax(output, -1);
        chunk.forEach((index, row) => {
          (results as TokenClassificationResponse['results'])[index] = tokenClassificationResult(
            output,
            scores,
            row,
            encodings[index],
            this.#labels,
          );
        });
        return;
      }
    }
  }

  /** Groups inputs of similar token length into runs of at most `maxBatchSequences`, to cut padding. */
  #chunksBySimilarLength(encodings: readonly Encoding[]): number[][] {
    const order = encodings.map((_, index) => index).sort((a, b) => encodings[a].ids.length - encodings[b].ids.length);
    const chunks: number[][] = [];
    for (let i = 0; i < order.length; i += this.#maxBatchSequences) chunks.push(order.slice(i, i + this.#maxBatchSequences));
    return chunks;
  }
}

/** A small output of the model's shape for checking a transform: 2 sequences of 3 tokens. */
function sampleOutputDims(signature: ModelSignature, pkg: ModelPackage): number[] {
  const last = signature.output.shape.at(-1);
  const width = typeof last === 'number' && last > 0 ? last : Math.max(labelsOf(pkg.modelConfig).size, 2);
  return pkg.modelType === 'sequence_classification' ? [2, width] : [2, 3, width];
}
