/**
 * What follows onnxruntime on every merged batch, before the scheduler hands rows back: the Lua transform on the whole
 * batch output (transforms are row-wise), then, for a sentence_embedding model whose output is still per token, the
 * pooling. It runs where the session runs: in each inference worker, beside onnxruntime (`serve`), so that a script
 * that runs up to its time limit holds that worker and never the event loop; on the calling thread when the pipeline
 * has no workers (`infer`, the build's checks). One function for both, so both give the same outputs.
 */
import type { ModelType, Pooling } from './config.ts';
import { poolTokens } from './pooling.ts';
import { Tensor } from './tensor.ts';
import type { PaddedBatch } from './tokenizer/index.ts';
import type { LuaTransform, LuaTransformOptions } from './transform/index.ts';

/** The steps after onnxruntime, ready to run. */
export interface PostprocessSteps {
  readonly modelType: ModelType;
  /** How a sentence_embedding output that is still per token is pooled. */
  readonly pooling: Pooling;
  readonly transform: LuaTransform | null;
}

/**
 * What an inference worker needs to make its own steps (it gets them in its load message): the transform's script and
 * options (libraries, time and memory limits, where wasmoon's glue.wasm is), and the pooling.
 */
export interface PostprocessSettings {
  pooling: Pooling;
  transform: { script: string; options: LuaTransformOptions } | null;
}

/**
 * Makes the steps of `settings`: compiles the transform in a Lua state of this thread's own (a ConfigError when it
 * does not compile or its options are wrong). The Lua runtime loads only when there is a transform.
 */
export async function createPostprocessSteps(modelType: ModelType, settings: PostprocessSettings): Promise<PostprocessSteps> {
  let transform: LuaTransform | null = null;
  if (settings.transform !== null) {
    const { LuaTransform } = await import('./transform/index.ts');
    transform = await LuaTransform.create(settings.transform.script, settings.transform.options);
  }
  return { modelType, pooling: settings.pooling, transform };
}

/** Whether the steps read the attention mask: the transform gets it, the pooling weighs tokens by it. */
export function needsAttentionMask(steps: PostprocessSteps): boolean {
  return steps.transform !== null || steps.modelType === 'sentence_embedding';
}

/** The batch's [batch, seq] attention mask as floats (1 for tokens, 0 for padding), as the transform and pooling take it. */
export function attentionMaskOf(batch: PaddedBatch): Tensor {
  return new Tensor(Float32Array.from(batch.attentionMask, Number), [batch.batchSize, batch.sequenceLength]);
}

/**
 * The transform on the batch output, then a sentence_embedding output still per token pooled to [batch, hidden] (unless
 * the transform pooled it already). `mask` is attentionMaskOf(batch) when needsAttentionMask(steps), else null. A
 * script failure, its time or memory limit, is the transform's InternalError.
 */
export function postprocessBatch(output: Tensor, mask: Tensor | null, steps: PostprocessSteps): Tensor {
  let result = output;
  if (steps.transform) result = steps.transform.run(result, mask!);
  if (steps.modelType === 'sentence_embedding' && result.rank === 3) result = poolTokens(result, mask!, steps.pooling);
  return result;
}
