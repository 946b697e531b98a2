import type { ErrorObject } from 'ajv';
import type { ModelType } from './config.ts';
import { InputError } from './errors.ts';
import { requestValidator } from './request-validators.ts';
import { keyPathOf } from './schema-path.ts';
import type { PredictRequest } from './schemas.ts';

/** Checks a prediction request body against the model type's schema; throws InputError with the reason. */
export function parsePredictRequest(modelType: ModelType, body: unknown): PredictRequest {
  const validate = requestValidator(modelType);
  if (!validate(body)) throw new InputError(describeRequestError(validate.errors?.[0], body));
  return body as PredictRequest;
}

function describeRequestError(error: ErrorObject | undefined, body: unknown): string {
  if (!error) return 'request does not match the schema';
  // A text-or-pair item fails each branch of its oneOf in its own way; one sentence says what is accepted.
  const pairItem = /^\/inputs\/(\d+)(?:\/|$)/.exec(error.instancePath);
  if (pairItem && error.schemaPath.includes('/items/oneOf')) {
    const index = Number(pairItem[1]);
    const item = (body as { inputs: unknown[] }).inputs[index];
    if (item === '') return `inputs[${index}] is an empty string`;
    if (Array.isArray(item) && item.length === 2 && item.every((text) => typeof text === 'string')) {
      return `inputs[${index}][${item.indexOf('')}] is an empty string`;
    }
    return `inputs[${index}] must be a non-empty text or a pair [text, text_pair] of non-empty texts`;
  }
  const field = keyPathOf(error.instancePath);
  switch (error.keyword) {
    case 'type':
      if (field === '') return `request body must be a JSON object, got ${typeName(body)}`;
      return `${field} must be ${article((error.params as { type: string }).type)}, got ${typeName(error.data)}`;
    case 'required':
      return `missing required field "${(error.params as { missingProperty: string }).missingProperty}"`;
    case 'additionalProperties': {
      const extra = (error.params as { additionalProperty: string }).additionalProperty;
      return field === '' ? `unknown field "${extra}"` : `unknown field "${extra}" in ${field}`;
    }
    case 'minItems':
      return `${field} must not be empty`;
    case 'minLength':
      return `${field} is an empty string`;
    default:
      return `${field || 'request'} ${error.message ?? 'is invalid'}`;
  }
}

function article(type: string): string {
  return type === 'object' ? 'an object' : type === 'array' ? 'a list' : type === 'integer' ? 'an integer' : `a ${type}`;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'an object';
  return typeof value;
}
