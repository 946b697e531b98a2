/**
 * The build's run at the maximum length (issue 30): one input of exactly the length the model will be served with
 * (batch 1, every position attended), through the pipeline — tokenizer, onnxruntime, result (build-model.ts leaves the
 * transform out: a script may refuse inputs on purpose). A graph
 * that cannot run that length (a position table shorter than every source said, a reshape fixed to a smaller size) then
 * fails the build with a ConfigError, not the first long request with a 500.
 */
import { POOLED_MODEL_TYPES } from '../encoder/config.ts';
import { ConfigError, isEncoderError } from '../encoder/errors.ts';
import type { ModelMaxLength } from '../encoder/max-length.ts';
import type { PredictPipeline } from '../encoder/predict-pipeline.ts';
import { DEFAULT_CHECK_TEXTS } from './quantize/accuracy-gate.ts';

/** A text is doubled until it holds the length; a tokenizer that needs more than this many characters a token is not waited for. */
const MAX_CHARS_PER_TOKEN = 64;

/**
 * Runs one input of `pipeline.tokenizer.maxLength` tokens; returns that length. An InternalError of the run (what a
 * request of that length would have answered with a 500) becomes a ConfigError that names the length, why it was
 * chosen (`maxLength.reason`) and how to serve a shorter one.
 */
export async function checkMaxLength(pipeline: PredictPipeline, maxLength: ModelMaxLength | undefined): Promise<number> {
  const { tokenizer } = pipeline;
  const length = tokenizer.maxLength;
  let text = DEFAULT_CHECK_TEXTS.join(' ');
  while (tokenizer.encode(text).ids.length < length && text.length < length * MAX_CHARS_PER_TOKEN) text = `${text} ${text}`;
  const tokens = tokenizer.encode(text).ids.length;
  const body = POOLED_MODEL_TYPES.includes(pipeline.modelType) ? { inputs: [text], normalize: false } : { inputs: [text] };
  try {
    await pipeline.predict(body);
  } catch (error) {
    if (!isEncoderError(error) || error.kind !== 'internal') throw error;
    const why = maxLength ? ` (${maxLength.reason})` : '';
    throw new ConfigError(
      `the model cannot run its maximum length: an input of ${tokens} tokens${why} fails: ${error.message.trim()}. ` +
        'Lower model_max_length in tokenizer_config.json to the length the model runs, and build again',
      { cause: error },
    );
  }
  return tokens;
}
