import { Ajv, type Options, type ValidateFunction } from 'ajv';

/**
 * A validator of one of this program's own JSON schemas (constants in the source). Ajv would first check the schema
 * against the JSON Schema meta-schema, compiling the meta-schema on the way: ~40 ms of every start-up that
 * validates anything. test/shared/built-in-schemas.test.ts checks each schema against the meta-schema instead.
 */
export function compileBuiltInSchema<T = unknown>(schema: object, options: Options = {}): ValidateFunction<T> {
  return new Ajv({ ...options, validateSchema: false }).compile<T>(schema);
}
