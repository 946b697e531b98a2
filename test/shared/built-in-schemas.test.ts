import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { CONFIG_SCHEMA } from '../../src/encoder/config.ts';
import { REQUEST_SCHEMAS } from '../../src/encoder/schemas.ts';
import { COHERE_EMBED_REQUEST_SCHEMA } from '../../src/serve/http/cohere-embed.ts';
import { EMBEDDINGS_REQUEST_SCHEMA } from '../../src/serve/http/openai-embeddings.ts';
import { TEI_PREDICT_FIELDS_SCHEMA } from '../../src/serve/http/predict-body.ts';
import { RERANK_REQUEST_SCHEMA } from '../../src/serve/http/rerank.ts';
import { compileBuiltInSchema } from '../../src/shared/built-in-schema.ts';

// compileBuiltInSchema skips Ajv's meta-schema check at run time; this is that check, for every schema it compiles.
const BUILT_IN: [string, object][] = [
  ...Object.entries(REQUEST_SCHEMAS).map(([type, schema]): [string, object] => [`request of ${type}`, schema]),
  ['build configuration', CONFIG_SCHEMA],
  ['/v1/embeddings request', EMBEDDINGS_REQUEST_SCHEMA],
  ['/v1/rerank request', RERANK_REQUEST_SCHEMA],
  ['/v1/embed and /v2/embed request', COHERE_EMBED_REQUEST_SCHEMA],
  ["TEI's fields on /predict", TEI_PREDICT_FIELDS_SCHEMA],
];

describe('built-in JSON schemas', () => {
  it.each(BUILT_IN)('%s is a valid JSON schema (draft-07 meta-schema, strict mode)', (_name, schema) => {
    const ajv = new Ajv({ strict: true, strictRequired: false });
    expect(ajv.validateSchema(schema), ajv.errorsText()).toBe(true);
    expect(() => ajv.compile(schema)).not.toThrow();
  });

  it.each(BUILT_IN)('%s limits string lengths only to at least 1, the same in UTF-16 units as in code points', (_name, schema) => {
    // BUILT_IN_SCHEMA_OPTIONS has ajv measure strings with .length (`unicode: false`), which would count an emoji as 2
    const limits = lengthLimitsOf(schema);
    expect(limits.filter((limit) => !(limit.keyword === 'minLength' && limit.value <= 1))).toEqual([]);
  });

  it('the length check finds a limit whose meaning depends on how characters are counted', () => {
    expect(lengthLimitsOf({ type: 'array', items: { type: 'string', minLength: 1, maxLength: 4 } })).toEqual([
      { keyword: 'minLength', value: 1 },
      { keyword: 'maxLength', value: 4 },
    ]);
  });

  it('the check finds a broken schema', () => {
    const ajv = new Ajv();
    expect(ajv.validateSchema({ type: 'object', properties: { a: { type: 'strnig' } } })).toBe(false);
  });

  it('compiled without the meta-schema check, a validator still validates', () => {
    const validate = compileBuiltInSchema<{ a: string }>({ type: 'object', required: ['a'], properties: { a: { type: 'string' } } });
    expect(validate({ a: 'x' })).toBe(true);
    expect(validate({ a: 1 })).toBe(false);
    expect(validate.errors?.[0]?.instancePath).toBe('/a');
  });

  it('a compiled validator measures a string by .length, without walking it', () => {
    const validate = compileBuiltInSchema({ type: 'string', minLength: 1 });
    expect(validate('x')).toBe(true);
    expect(validate('')).toBe(false);
    // ajv's code-point count is a helper function the generated code calls; with `unicode: false` it is not there
    expect(String(validate)).not.toMatch(/ucs2length|func\d+\(data\)/);
    expect(String(validate)).toMatch(/data\.length/);
  });
});

function lengthLimitsOf(schema: unknown): { keyword: string; value: number }[] {
  if (typeof schema !== 'object' || schema === null) return [];
  const own = Object.entries(schema)
    .filter(([keyword]) => keyword === 'minLength' || keyword === 'maxLength')
    .map(([keyword, value]) => ({ keyword, value: value as number }));
  return [...own, ...Object.values(schema).flatMap(lengthLimitsOf)];
}
