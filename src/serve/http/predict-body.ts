import type { ValidateFunction } from 'ajv';
import type { ModelType } from '../../encoder/config.ts';
import { InputError } from '../../encoder/errors.ts';
import { REQUEST_SCHEMAS } from '../../encoder/schemas.ts';
import { compileBuiltInSchema } from '../../shared/built-in-schema.ts';
import { orNull } from './field-api-body.ts';

/**
 * The Hugging Face Inference API's request options, which its clients send along to an endpoint (Weaviate's
 * text2vec-huggingface with an endpoint URL, among others) and text-embeddings-inference ignores: accepted on TEI's
 * bodies, with no effect here.
 */
export const HF_INFERENCE_OPTIONS = orNull({
  type: 'object',
  additionalProperties: false,
  properties: { wait_for_model: { type: 'boolean' }, use_cache: { type: 'boolean' }, use_gpu: { type: 'boolean' } },
  description: "The Hugging Face Inference API's request options: accepted, no effect (the model is always loaded, nothing is cached, it runs where it runs).",
});

/**
 * What POST /predict hands the predictor, which validates spec 2's body itself (422 `Invalid input: …`). Two
 * translations first:
 * - an optional field given as null (`"normalize": null`, `"metadata": null`) is left out: null means "not given";
 *   a required one stays, and is refused by the predictor as the wrong type;
 * - text-embeddings-inference's options, which a TEI client's body brings along when its /embed or /predict path is
 *   pointed here (the bodies are alike: `inputs`, `normalize`), are checked and left out where they ask for what
 *   this server does anyway, and refused (422) where they would ask for something else.
 */
export const TEI_PREDICT_FIELDS_SCHEMA = {
  type: 'object',
  properties: {
    options: HF_INFERENCE_OPTIONS,
    truncate: orNull({ type: 'boolean', description: "TEI: accepted; inputs are always truncated to the model's length (false does not make a long one an error)." }),
    truncation_direction: orNull({ type: 'string', enum: ['Right', 'right'], description: 'TEI: Right (its default) only; inputs are truncated at their end.' }),
    prompt_name: { type: 'null', description: 'TEI: null only; this server applies no prompts (prepend one to the text).' },
    raw_scores: orNull({ type: 'boolean', description: 'TEI: accepted and ignored; classification results hold both the logits and the softmax scores.' }),
  },
} as const;

const TEI_FIELDS = Object.keys(TEI_PREDICT_FIELDS_SCHEMA.properties);

let validateTeiFields: ValidateFunction | undefined;

export function predictBodyOf(body: unknown, modelType: ModelType): unknown {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return body; // the predictor says what it must be
  validateTeiFields ??= compileBuiltInSchema(TEI_PREDICT_FIELDS_SCHEMA, { allErrors: false });
  if (!validateTeiFields(body)) throw teiFieldError(validateTeiFields.errors?.[0]?.instancePath.slice(1) ?? '', body as Record<string, unknown>);
  const schema: { properties: object; required?: readonly string[] } = REQUEST_SCHEMAS[modelType];
  const optional = (field: string) => field in schema.properties && !(schema.required ?? []).includes(field);
  return Object.fromEntries(
    Object.entries(body).filter(([field, value]) => !TEI_FIELDS.includes(field) && !(value === null && optional(field))),
  );
}

function teiFieldError(path: string, body: Record<string, unknown>): InputError {
  const [field] = path.split('/');
  const value = JSON.stringify(body[field]);
  switch (field) {
    case 'options':
      return new InputError(`options ${value} is not the Hugging Face Inference API's request options: an object of the booleans wait_for_model, use_cache, use_gpu`, { field });
    case 'truncation_direction':
      return new InputError(`truncation_direction ${value} is not supported: inputs are truncated at their end ("Right")`, { field });
    case 'prompt_name':
      return new InputError(`prompt_name ${value} is not supported: this server applies no prompts; prepend the prompt to each input`, { field });
    default: {
      const got = body[field];
      return new InputError(`${field} must be a boolean, got ${Array.isArray(got) ? 'a list' : typeof got}`, { field });
    }
  }
}
