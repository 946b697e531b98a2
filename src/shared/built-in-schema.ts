import { Ajv, type Options, type ValidateFunction } from 'ajv';

/**
 * The ajv options every built-in schema is compiled with, at run time or as standalone code at build.
 * - `validateSchema: false`: ajv would first check the schema against the JSON Schema meta-schema, compiling the
 *   meta-schema on the way: ~40 ms of every start-up that validates anything. test/shared/built-in-schemas.test.ts
 *   checks each schema against the meta-schema instead.
 * - `unicode: false`: string lengths are JavaScript's `.length`. ajv's default counts code points by walking the whole
 *   string, which for `minLength: 1` on an 8 MiB input held serve's event loop ~40 ms, twice (both branches of a
 *   oneOf). The built-in schemas only ever ask for `minLength: 1`, which means the same either way (the test checks).
 * - `logger: false`: ajv 8 still honours `unicode` but warns on stderr that the option is deprecated, for every
 *   validator made. Nothing else would be logged: the test compiles every built-in schema in strict mode.
 */
export const BUILT_IN_SCHEMA_OPTIONS = { validateSchema: false, unicode: false, logger: false } as const satisfies Options;

/** A validator of one of this program's own JSON schemas (constants in the source). */
export function compileBuiltInSchema<T = unknown>(schema: object, options: Options = {}): ValidateFunction<T> {
  return new Ajv({ ...options, ...BUILT_IN_SCHEMA_OPTIONS }).compile<T>(schema);
}
