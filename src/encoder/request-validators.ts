import type { ValidateFunction } from 'ajv';
import { compileBuiltInSchema } from '../shared/built-in-schema.ts';
import type { ModelType } from './config.ts';
import { REQUEST_SCHEMAS } from './schemas.ts';

/** How the prediction request validators are made: the first error only, with the offending value (the messages quote it). */
export const REQUEST_VALIDATOR_OPTIONS = { allErrors: false, verbose: true } as const;

/** Compiled on first use, one model type per process: compiling every schema at load cost start-up ~100 ms. */
const validators = new Map<ModelType, ValidateFunction>();

/**
 * The prediction request validator of a model type (REQUEST_SCHEMAS). From the sources it is compiled at its first
 * use; the single executable's bundle replaces this module with the same validators as code generated at build
 * (ajv's standalone code, scripts/request-validators-code.ts), so its first request compiles nothing (~5–10 ms of
 * every `infer`).
 */
export function requestValidator(modelType: ModelType): ValidateFunction {
  let validate = validators.get(modelType);
  if (validate === undefined) {
    validate = compileBuiltInSchema(REQUEST_SCHEMAS[modelType], REQUEST_VALIDATOR_OPTIONS);
    validators.set(modelType, validate);
  }
  return validate;
}
