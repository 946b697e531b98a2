import type { ErrorObject, ValidateFunction } from 'ajv';
import { compileBuiltInSchema } from '../../shared/built-in-schema.ts';
import { HttpError } from './errors.ts';

/**
 * Request bodies of the field's APIs (OpenAI, Cohere, Infinity): validated against the route's JSON schema, refused
 * with a 400 that names the field, with null taken as "not given". Clients send null for the options they leave
 * unset (Python clients serialise `None`, typed clients `null`), and OpenAI and Cohere accept it; a schema says
 * so with `orNull`, and the parsed body comes without those fields.
 */

type Schema = { type: string; enum?: readonly unknown[] } & Record<string, unknown>;

/** `schema`, or null (which the parsed body then leaves out). An enum gains null too, as JSON Schema needs. */
export function orNull<S extends Schema>(schema: S): Omit<S, 'type' | 'enum'> & { type: [S['type'], 'null']; enum?: unknown[] } {
  const { enum: values, type, ...rest } = schema;
  return { ...rest, type: [type, 'null'], ...(values ? { enum: [...values, null] } : {}) } as Omit<S, 'type' | 'enum'> & { type: [S['type'], 'null']; enum?: unknown[] };
}

/**
 * The message of a 400 for a field, by its name: given the field's value and ajv's first error about it (which
 * may be deeper, e.g. at /documents/3). A field without one gets `'<field>' <ajv's message>`.
 */
export type FieldMessages = Record<string, (value: unknown, error: ErrorObject) => string>;

/**
 * The parser of one route's body. The validator is compiled at the first request (a server of another model type
 * never needs it). Unknown and missing top-level fields are worded as OpenAI words them.
 */
export function fieldApiBodyParser<T>(schema: object, messages: FieldMessages): (body: unknown) => T {
  let validate: ValidateFunction | undefined;
  return (body) => {
    validate ??= compileBuiltInSchema(schema, { allErrors: false });
    if (!validate(body)) {
      const error = validate.errors?.[0];
      throw new HttpError(400, describeError(error, body, messages), { param: paramOf(error) });
    }
    return withoutNulls(body as Record<string, unknown>) as T;
  };
}

/** A copy of an object without its null-valued members: null means "not given". */
export function withoutNulls(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([, value]) => value !== null));
}

function paramOf(error: ErrorObject | undefined): string | undefined {
  if (!error) return undefined;
  if (error.instancePath === '' && error.keyword === 'additionalProperties') return (error.params as { additionalProperty: string }).additionalProperty;
  if (error.instancePath === '' && error.keyword === 'required') return (error.params as { missingProperty: string }).missingProperty;
  return error.instancePath.split('/')[1] || undefined;
}

function describeError(error: ErrorObject | undefined, body: unknown, messages: FieldMessages): string {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'The request body must be a JSON object';
  const field = paramOf(error);
  if (!error || field === undefined) return 'The request does not match the request schema';
  if (error.instancePath === '' && error.keyword === 'additionalProperties') return `Unrecognized request argument supplied: ${field}`;
  if (error.instancePath === '' && error.keyword === 'required') return `Missing required parameter: '${field}'`;
  const message = messages[field];
  if (message) return message((body as Record<string, unknown>)[field], error);
  if (error.keyword === 'type' && error.instancePath === `/${field}`) return `'${field}' must be ${typesOf(error.params as { type: string | string[] })}`;
  return `'${field}' ${error.message ?? 'is invalid'}`;
}

const TYPE_WORDS: Record<string, string> = { string: 'a text', integer: 'an integer', number: 'a number', boolean: 'true or false', array: 'a list', object: 'an object', null: 'null' };

/** ajv's `type` list in words: "a text or null". */
function typesOf({ type }: { type: string | string[] }): string {
  return [type].flat().map((name) => TYPE_WORDS[name] ?? name).join(' or ');
}
