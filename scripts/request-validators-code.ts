import { Ajv } from 'ajv';
// CommonJS whose module.exports is the function, with itself as `default` (the form both the types and Node agree on)
import standalone from 'ajv/dist/standalone/index.js';
import { MODEL_TYPES } from '../src/encoder/config.ts';
import { REQUEST_VALIDATOR_OPTIONS } from '../src/encoder/request-validators.ts';
import { REQUEST_SCHEMAS } from '../src/encoder/schemas.ts';
import { BUILT_IN_SCHEMA_OPTIONS } from '../src/shared/built-in-schema.ts';

/**
 * A module with the same export as src/encoder/request-validators.ts, `requestValidator(modelType)`, whose validators
 * are ajv's standalone code of REQUEST_SCHEMAS, generated here with the same options instead of compiled at run time.
 * The executable's bundle takes it in place of that module (scripts/build-runtime.ts). It is an ES module that may also
 * call `require` for ajv's small runtime helpers (e.g. `ajv/dist/runtime/equal`), as ajv writes it: esbuild bundles
 * those.
 */
export function requestValidatorsCode(): string {
  const ajv = new Ajv({ ...REQUEST_VALIDATOR_OPTIONS, ...BUILT_IN_SCHEMA_OPTIONS, code: { source: true, esm: true } });
  for (const modelType of MODEL_TYPES) ajv.addSchema(REQUEST_SCHEMAS[modelType], modelType);
  const validators = standalone.default(ajv, Object.fromEntries(MODEL_TYPES.map((modelType) => [modelType, modelType])));
  // each model type is exported under its own name (`export const embedding = validate0;`), a valid identifier
  return `${validators}\nconst validators = { ${MODEL_TYPES.join(', ')} };\nexport const requestValidator = (modelType) => validators[modelType];\n`;
}
