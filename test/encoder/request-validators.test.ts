/**
 * The executable's request validators are ajv's standalone code generated at build (scripts/request-validators-code.ts);
 * from the sources they are compiled at first use. Both must accept and refuse the same bodies, with the same first
 * error: the messages of parsePredictRequest are built from it.
 */
import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';
import * as esbuild from 'esbuild';
import { describe, expect, it } from 'vitest';
import { requestValidatorsCode } from '../../scripts/request-validators-code.ts';
import { MODEL_TYPES, type ModelType } from '../../src/encoder/config.ts';
import { requestValidator } from '../../src/encoder/request-validators.ts';

/** The generated module, turned into CommonJS by esbuild as the executable's bundle does, and evaluated. */
function generatedValidators(): (modelType: ModelType) => ValidateFunction {
  const { code } = esbuild.transformSync(requestValidatorsCode(), { format: 'cjs', loader: 'js' });
  const module = { exports: {} as { requestValidator?: (modelType: ModelType) => ValidateFunction } };
  new Function('exports', 'require', 'module', code)(module.exports, createRequire(import.meta.url), module);
  return module.exports.requestValidator!;
}

const BODIES: unknown[] = [
  { inputs: ['a', 'b'], normalize: true },
  { inputs: ['a'], normalize: false, metadata: { k: 'v' } },
  { inputs: ['a'] },
  { inputs: [['query', 'document']] },
  { inputs: [['query', '']] },
  { inputs: [['only one']] },
  { inputs: ['😀 naïve'], normalize: 'yes' },
  { inputs: [] },
  { inputs: [''] },
  { inputs: [1, 'a'] },
  { inputs: 'a' },
  { inputs: ['a'], extra: 1 },
  { inputs: ['a'], metadata: { k: 1 } },
  { inputs: ['a'], metadata: [] },
  { normalize: true },
  'not an object',
  null,
  [],
  42,
];

describe('request validators generated at build', () => {
  const generated = generatedValidators();

  it.each(MODEL_TYPES)('%s: the same verdict and the same first error as the compiled schema, on every body', (modelType) => {
    const compiled = requestValidator(modelType);
    const standalone = generated(modelType);
    expect(typeof standalone).toBe('function');
    let refused = 0;
    for (const body of BODIES) {
      const verdict = compiled(body);
      expect(standalone(body), JSON.stringify(body)).toBe(verdict);
      if (!verdict) {
        refused++;
        const pick = (errors: ValidateFunction['errors']) => errors?.map(({ keyword, instancePath, schemaPath, params, data }) => ({ keyword, instancePath, schemaPath, params, data }));
        expect(pick(standalone.errors), JSON.stringify(body)).toEqual(pick(compiled.errors));
      }
    }
    expect(refused).toBeGreaterThan(5); // the corpus reaches the refusals, not only the happy path
  });

  it('measure a text by .length: they neither walk an 8 MiB input nor bundle the code-point counter', () => {
    expect(requestValidatorsCode()).not.toMatch(/ucs2length/);
  });
});
