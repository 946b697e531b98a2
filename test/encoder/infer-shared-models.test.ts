import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Ajv } from 'ajv';
import { beforeAll, describe, expect, it } from 'vitest';
import { RESPONSE_SCHEMAS } from '../../src/encoder/schemas.ts';
import type {
  EmbeddingResponse,
  SequenceClassificationResponse,
  TokenClassificationResponse,
} from '../../src/encoder/schemas.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import { hasShared, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';
import type { JsonOf } from '../../src/shared/float32-json.ts';

const ajv = new Ajv();
let dir: string;

function writeConfig(name: string, model: string, modelType: string, extra = ''): string {
  const file = path.join(dir, `${name}.yaml`);
  writeFileSync(file, `encoder:\n  name: ${name}\n  path: ${sharedModel(model)}\n  model_type: ${modelType}\n${extra}`);
  return file;
}

function norm(values: number[]): number {
  return Math.sqrt(values.reduce((sum, v) => sum + v * v, 0));
}

warnIfSharedMissing('infer on the shared tiny-bert exports');
describe.skipIf(!hasShared)('infer on the shared tiny-bert exports', () => {
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'infer-shared-'));
  });

  it('embeds every token of each input, in order, without special tokens', async () => {
    const config = writeConfig('emb', 'tiny-bert-embedding', 'embedding');
    const texts = ['Hello world!', 'A longer sentence, with punctuation.', 'x'];
    const { code, stdout, stderr } = await runCliCaptured(['infer', '--config', config, ...texts]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const response = JSON.parse(stdout) as JsonOf<EmbeddingResponse>;
    expect(ajv.validate(RESPONSE_SCHEMAS.embedding, response)).toBe(true);
    expect(response.model_id).toBe('emb');
    expect(response.results).toHaveLength(3);
    const first = response.results[0].embeddings;
    expect(first.map((e) => e.token_info?.token)).toEqual(['hello', 'world', '!']);
    expect(first.map((e) => [e.token_info?.start, e.token_info?.end])).toEqual([
      [0, 5],
      [6, 11],
      [11, 12],
    ]);
    expect(response.results[2].embeddings.map((e) => e.token_info?.token)).toEqual(['x']);
    for (const result of response.results) {
      for (const { embedding } of result.embeddings) {
        expect(embedding).toHaveLength(16);
        expect(norm(embedding)).toBeCloseTo(1, 5);
      }
    }
  });

  it('runs the sentence-embedding export as an embedding model too', async () => {
    const config = writeConfig('sentence', 'tiny-bert-sentence-embedding', 'embedding');
    const { code, stdout } = await runCliCaptured(['infer', '--config', config, 'Hello world!']);
    expect(code).toBe(0);
    const embeddings = (JSON.parse(stdout) as JsonOf<EmbeddingResponse>).results[0].embeddings;
    expect(embeddings.map((e) => e.token_info?.token_id)).toEqual([7592, 2088, 999]);
    expect(norm(embeddings[0].embedding)).toBeCloseTo(1, 5);
  });

  it('leaves embeddings unscaled with --no-normalize', async () => {
    const config = writeConfig('emb-raw', 'tiny-bert-embedding', 'embedding');
    const { code, stdout } = await runCliCaptured(['infer', '--config', config, '--no-normalize', 'Hello world!']);
    expect(code).toBe(0);
    const norms = (JSON.parse(stdout) as JsonOf<EmbeddingResponse>).results[0].embeddings.map((e) => norm(e.embedding));
    expect(norms.some((n) => Math.abs(n - 1) > 1e-3)).toBe(true);
  });

  it('classifies sequences with softmax scores and the id2label label', async () => {
    const config = writeConfig('cls', 'tiny-bert-sequence-classification', 'sequence_classification');
    const { code, stdout } = await runCliCaptured(['infer', '--config', config, 'I love it', 'I hate it']);
    expect(code).toBe(0);
    const response = JSON.parse(stdout) as JsonOf<SequenceClassificationResponse>;
    expect(ajv.validate(RESPONSE_SCHEMAS.sequence_classification, response)).toBe(true);
    for (const result of response.results) {
      expect(result.logits).toHaveLength(2);
      expect(Math.abs(result.scores.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-6);
      const expected = Math.exp(result.logits[0]) / (Math.exp(result.logits[0]) + Math.exp(result.logits[1]));
      expect(result.scores[0]).toBeCloseTo(expected, 6);
      expect(result.predicted_index).toBe(result.scores[0] >= result.scores[1] ? 0 : 1);
      expect(result.predicted_label).toBe(['good', 'bad'][result.predicted_index]);
    }
  });

  it('labels every token of a token classification model', async () => {
    const config = writeConfig('ner', 'tiny-bert-token-classification', 'token_classification');
    const out = path.join(dir, 'ner.json');
    const { code, stdout } = await runCliCaptured(['infer', '--config', config, 'John lives in Berlin', '-o', out]);
    expect(code).toBe(0);
    expect(stdout).toBe('');
    const response = JSON.parse(readFileSync(out, 'utf8')) as JsonOf<TokenClassificationResponse>;
    expect(ajv.validate(RESPONSE_SCHEMAS.token_classification, response)).toBe(true);
    const tokens = response.results[0].tokens;
    expect(tokens.map((t) => t.token_info.token)).toEqual(['john', 'lives', 'in', 'berlin']);
    for (const token of tokens) {
      const best = token.scores.indexOf(Math.max(...token.scores));
      expect(token.label).toBe(['good', 'bad'][best]);
      expect(token.score).toBe(token.scores[best]);
      expect(Math.abs(token.scores[0] + token.scores[1] - 1)).toBeLessThan(1e-6);
    }
  });

  it('exits 2 with the reason on stderr for an empty input and a wrong model type', async () => {
    const config = writeConfig('cls2', 'tiny-bert-sequence-classification', 'sequence_classification');
    const empty = await runCliCaptured(['infer', '--config', config, 'fine', '']);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toBe('error: Invalid input: inputs[1] is an empty string\n');

    const wrongType = writeConfig('wrong', 'tiny-bert-sequence-classification', 'token_classification');
    const mismatch = await runCliCaptured(['infer', '--config', wrongType, 'text']);
    expect(mismatch.code).toBe(2);
    expect(mismatch.stderr).toContain('model output "logits" is float32 [batch_size, 2] (rank 2)');
  });

  it('reproduces the published tinybert per-token embeddings within 1e-5', async () => {
    const golden = JSON.parse(readFileSync(path.join(sharedModel('tinybert-golden'), 'golden.json'), 'utf8')) as {
      text: string;
      outputs: Record<string, number[][]>;
    };
    const rows = golden.outputs['output_0_per_token_including_CLS_and_SEP'];
    expect(rows).toHaveLength(13);
    const config = writeConfig('golden', 'tinybert-golden', 'embedding');
    const { code, stdout, stderr } = await runCliCaptured(['infer', '--config', config, '--no-normalize', golden.text]);
    expect(code).toBe(0);
    expect(stderr).toContain('using "output_0"');
    const embeddings = (JSON.parse(stdout) as JsonOf<EmbeddingResponse>).results[0].embeddings;
    expect(embeddings).toHaveLength(11);
    embeddings.forEach(({ embedding }, i) => {
      const expected = rows[i + 1];
      expect(embedding).toHaveLength(expected.length);
      const worst = Math.max(...embedding.map((v, j) => Math.abs(v - expected[j])));
      expect(worst).toBeLessThan(1e-5);
    });
  });
});
