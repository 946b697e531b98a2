/**
 * Issue 30 on tinybert-golden, whose position table has 100 rows: every input over 100 tokens used to answer
 * `500 onnxruntime failed: … broadcast … 100 by 152`. Now the length is read from the graph, so a 1,000-token input
 * answers 200 truncated to 100 — through the pipeline, `infer --config`, HTTP (/predict, /v1/embeddings) and a built
 * executable — even when config.json and tokenizer_config.json claim 512; the build says which length it uses and why,
 * and runs one input at that length, so a graph that cannot run it fails the build instead of a request.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AssetSection } from '../../runtime/asset-section.ts';
import { buildModel, BUILD_STEPS } from '../../src/builder/build-model.ts';
import { checkMaxLength } from '../../src/builder/max-length-check.ts';
import { readModelDirectory } from '../../src/builder/model-directory.ts';
import { decodeModel, encodeModel } from '../../src/builder/quantize/onnx-format.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { ConfigError, InternalError } from '../../src/encoder/errors.ts';
import { readModelPackage } from '../../src/encoder/model-package.ts';
import { readPackagedModel } from '../../src/encoder/packaged-model.ts';
import { PredictPipeline } from '../../src/encoder/predict-pipeline.ts';
import type { EmbeddingResponse } from '../../src/encoder/schemas.ts';
import { EncoderTokenizer } from '../../src/encoder/tokenizer/index.ts';
import { writeFakeBaseRuntime } from '../helpers/fake-base-runtime.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import { hasShared, sharedModel, warnIfSharedMissing } from '../helpers/shared-fixtures.ts';
import type { JsonOf } from '../../src/shared/float32-json.ts';

warnIfSharedMissing('the real maximum length of tinybert-golden (issue 30)');

const GOLDEN_TABLE = 'position table of model.onnx (embeddings.position_embeddings.weight): 100 rows';
const SENTENCE = 'It is a truth universally acknowledged, ';
const LINUX = 'x86_64-unknown-linux-gnu';

let work: string;
let golden: string;
/** tinybert-golden whose config.json and tokenizer_config.json claim 512. */
let claims512: string;
/** A text of at least 1,000 tokens for the golden tokenizer (counted untruncated in the first test). */
let longText: string;

/** A copy of the golden model's files, with `files` written over them. */
function goldenCopy(name: string, files: Record<string, string | Uint8Array> = {}): string {
  const dir = path.join(work, name);
  mkdirSync(dir, { recursive: true });
  for (const file of ['model.onnx', 'config.json', 'tokenizer.json']) copyFileSync(path.join(sharedModel('tinybert-golden'), file), path.join(dir, file));
  for (const [file, content] of Object.entries(files)) writeFileSync(path.join(dir, file), content);
  return dir;
}

const configOf = (dir: string) => parseBuildConfig(`encoder:\n  name: golden\n  path: ${dir}\n  model_type: embedding\n`, { baseDir: work });

function configFile(dir: string, name: string): string {
  const file = path.join(work, `${name}.yaml`);
  writeFileSync(file, `encoder:\n  name: ${name}\n  path: ${dir}\n  model_type: embedding\n`);
  return file;
}

function fakeBaseRuntime(): string {
  return writeFakeBaseRuntime(path.join(work, 'base-runtime'));
}

/** Runs `build` in-process; the step lines it printed, and the result or the error. */
async function build(dir: string, name: string) {
  const lines: string[] = [];
  const outputPath = path.join(work, name);
  const result = await buildModel(
    { configFile: configFile(dir, name), platform: LINUX, baseBinaryPath: fakeBaseRuntime(), outputPath, runtimeVersion: '0.1.0', cwd: work },
    { step: (index, title, detail) => lines.push(`[${index}/${BUILD_STEPS.length}] ${title}: ${detail}`), progress: () => {} },
  ).catch((error: unknown) => error);
  return { lines, result, outputPath };
}

/** The embedding response's token count: results hold the text's tokens, without [CLS] and [SEP]. */
const tokensOf = (response: JsonOf<EmbeddingResponse> | EmbeddingResponse) => response.results[0].embeddings.length + 2;

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), 'max-length-build-'));
  if (!hasShared) return;
  golden = sharedModel('tinybert-golden');
  claims512 = goldenCopy('claims-512', {
    'config.json': JSON.stringify({ ...JSON.parse(readFileSync(path.join(golden, 'config.json'), 'utf8')), max_position_embeddings: 512 }),
    'tokenizer_config.json': JSON.stringify({ model_max_length: 512 }),
  });
  longText = SENTENCE.repeat(100);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe.skipIf(!hasShared)('tinybert-golden: inputs over its 100 positions', () => {
  it('a 1,000-token input failed inside onnxruntime at the tokenizer default of 512 (what the fix prevents)', async () => {
    const tokenizer = EncoderTokenizer.fromJson(readFileSync(path.join(golden, 'tokenizer.json'), 'utf8'));
    expect(tokenizer.encodeWith(longText, { truncation: null, padding: null }).ids.length).toBeGreaterThanOrEqual(1000);
    // the package of an executable built before the length was recorded: the tokenizer's 512 applies
    const { maxLength: _recorded, ...old } = readModelPackage(configOf(claims512));
    const pipeline = await PredictPipeline.load(old);
    try {
      expect(pipeline.tokenizer.maxLength).toBe(512);
      const error = await pipeline.predict({ inputs: [longText], normalize: false }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InternalError);
      expect((error as Error).message).toMatch(/^onnxruntime failed: .*broadcast/i);
    } finally {
      await pipeline.close();
    }
  });

  it('the pipeline of the folder truncates it to 100, the length the graph shows, whatever the files claim', async () => {
    for (const dir of [golden, claims512]) {
      const pkg = readModelDirectory(configOf(dir));
      expect(pkg.maxLength.tokens, dir).toBe(100);
      expect(pkg.maxLength.reason, dir).toMatch(new RegExp(`^${escape(GOLDEN_TABLE)}`));
      const pipeline = await PredictPipeline.load(pkg);
      try {
        const response = (await pipeline.predict({ inputs: [longText, 'short'], normalize: false })) as EmbeddingResponse;
        expect(tokensOf(response), dir).toBe(100);
        expect(response.results[1].embeddings).toHaveLength(pipeline.tokenizer.encode('short').ids.length - 2);
        // the text's first 98 tokens are kept ([CLS] and [SEP] around them): cut at the end, not shifted
        const whole = pipeline.tokenizer.encodeWith(longText, { truncation: null, padding: null });
        expect(response.results[0].embeddings.at(-1)?.token_info?.end).toBe(whole.offsets[98][1]);
      } finally {
        await pipeline.close();
      }
    }
    expect(readModelDirectory(configOf(claims512)).maxLength.reason).toBe(
      `${GOLDEN_TABLE}; config.json max_position_embeddings says 512; tokenizer_config.json model_max_length says 512`,
    );
  });

  it('`infer --config` answers it, truncated to 100', async () => {
    const { code, stdout, stderr } = await runCliCaptured(['infer', '--config', configFile(claims512, 'infer-512'), longText]);
    expect(stderr).not.toMatch(/error/); // the one line is the note that output_0 is read as the token vectors
    expect(code).toBe(0);
    expect(tokensOf(JSON.parse(stdout) as JsonOf<EmbeddingResponse>)).toBe(100);
  });

  describe('over HTTP (in-process server)', () => {
    const servers: InProcessEncoder[] = [];
    afterAll(async () => {
      await Promise.all(servers.map((server) => server.close()));
    });
    const post = (server: InProcessEncoder, route: string, body: unknown) =>
      fetch(`${server.httpUrl}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

    it('answers 200 on /predict and /v1/embeddings, truncated to 100; token ids beyond 100 are a 400', async () => {
      for (const dir of [golden, claims512]) {
        const server = await serveInProcess(dir, 'golden', 'embedding');
        servers.push(server);
        const predict = await post(server, '/predict', { inputs: [longText], normalize: true });
        expect(predict.status, dir).toBe(200);
        expect(tokensOf((await predict.json()) as JsonOf<EmbeddingResponse>)).toBe(100);

        const embeddings = await post(server, '/v1/embeddings', { model: 'golden', input: [longText, longText.slice(0, 2000)] });
        expect(embeddings.status, dir).toBe(200);
        const body = (await embeddings.json()) as { data: { embedding: number[] }[]; usage: { prompt_tokens: number } };
        expect(body.data).toHaveLength(2);
        expect(body.usage.prompt_tokens).toBe(200);

        const atLength = await post(server, '/v1/embeddings', { model: 'golden', input: [Array.from({ length: 100 }, () => 5)] });
        expect(atLength.status).toBe(200);
        const beyond = await post(server, '/v1/embeddings', { model: 'golden', input: [Array.from({ length: 1000 }, () => 5)] });
        expect(beyond.status).toBe(400);
        expect(((await beyond.json()) as { error: { message: string } }).error.message).toBe("input[0] holds 1000 token ids, more than the model's 100");
      }
    });
  });

  it('build says the position table decided, records 100 in the manifest, and the executable truncates to it', async () => {
    const { lines, result, outputPath } = await build(claims512, 'built-512');
    expect(result).toMatchObject({ outputPath, target: LINUX });
    const step = lines.find((line) => line.startsWith(`[4/6] ${BUILD_STEPS[3]}: `));
    expect(step).toContain(
      `max length: 100 tokens (${GOLDEN_TABLE}; config.json max_position_embeddings says 512; tokenizer_config.json model_max_length says 512), run once at that length`,
    );
    const section = (await AssetSection.open(outputPath))!;
    try {
      expect(section.manifest.model).toMatchObject({ max_length: 100, max_length_reason: expect.stringMatching(/^position table of model\.onnx/) });
      const pipeline = await PredictPipeline.load(await readPackagedModel(section));
      try {
        expect(pipeline.tokenizer.maxLength).toBe(100);
        expect(tokensOf((await pipeline.predict({ inputs: [longText], normalize: false })) as EmbeddingResponse)).toBe(100);
      } finally {
        await pipeline.close();
      }
    } finally {
      await section.close();
    }
  });

  it('a graph that cannot run the length the files claim fails the build with a ConfigError, and nothing is written', async () => {
    // the table renamed as a relative one: the detection no longer sees it, so config.json's 512 stands
    const model = decodeModel(readFileSync(path.join(golden, 'model.onnx')));
    const rename = (name: string) => (name === 'embeddings.position_embeddings.weight' ? 'rel_table' : name);
    for (const tensor of model.graph!.initializer) tensor.name = rename(tensor.name!);
    for (const node of model.graph!.node) node.input = node.input.map(rename);
    const hidden = goldenCopy('hidden-table', {
      'model.onnx': encodeModel(model),
      'config.json': readFileSync(path.join(claims512, 'config.json')),
      'tokenizer_config.json': readFileSync(path.join(claims512, 'tokenizer_config.json')),
    });
    expect(readModelDirectory(configOf(hidden)).maxLength.tokens).toBe(512);

    const { result, outputPath, lines } = await build(hidden, 'hidden-built');
    expect(result).toBeInstanceOf(ConfigError);
    expect((result as Error).message).toMatch(
      /^the model cannot run its maximum length: an input of 512 tokens \(config\.json max_position_embeddings: 512; tokenizer_config\.json model_max_length says 512\) fails: onnxruntime failed: .*broadcast.* 100 by 512\. Lower model_max_length in tokenizer_config\.json to the length the model runs, and build again$/is,
    );
    expect(lines.some((line) => line.startsWith('[4/6]'))).toBe(false);
    expect(() => readFileSync(outputPath)).toThrow(/ENOENT/);

    // the remedy the message gives works
    writeFileSync(path.join(hidden, 'tokenizer_config.json'), JSON.stringify({ model_max_length: 100 }));
    expect((await build(hidden, 'hidden-fixed')).result).toMatchObject({ target: LINUX });
  });

  it('checkMaxLength runs the pipeline at its length: a length forced past the table is a ConfigError naming it', async () => {
    const pkg = readModelDirectory(configOf(golden));
    const forced = await PredictPipeline.load({ ...pkg, maxLength: { tokens: 152, reason: 'forced by the test' } });
    try {
      const error = await checkMaxLength(forced, { tokens: 152, reason: 'forced by the test' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(/^the model cannot run its maximum length: an input of 152 tokens \(forced by the test\) fails: onnxruntime failed: .*100 by 152/s);
    } finally {
      await forced.close();
    }
    const real = await PredictPipeline.load(pkg);
    try {
      await expect(checkMaxLength(real, pkg.maxLength)).resolves.toBe(100);
    } finally {
      await real.close();
    }
  });
});

describe('the build check on generated models (no shared fixtures needed)', () => {
  it('runs one input of exactly the reconciled length, for each model type', async () => {
    for (const [modelType, labels] of [['embedding', undefined], ['sentence_embedding', undefined], ['sequence_classification', ['a', 'b']], ['token_classification', ['O', 'X']]] as const) {
      const dir = await generateTinyModel({ modelType, maxPositions: 48, ...(labels ? { labels: [...labels] } : {}) });
      try {
        // tokenizer_config.json claims more than the table: the table's 48 is run
        writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({ model_max_length: 512 }));
        const config = parseBuildConfig(`encoder:\n  name: g\n  path: ${dir}\n  model_type: ${modelType}\n`, { baseDir: dir });
        const pkg = readModelDirectory(config);
        expect(pkg.maxLength.tokens).toBe(48);
        const runs: [number, number, number][] = [];
        const pipeline = await PredictPipeline.load(pkg);
        try {
          const stop = pipeline.observeBatches((run) => runs.push([run.rows, run.tokens, run.paddedTokens]));
          await expect(checkMaxLength(pipeline, pkg.maxLength), modelType).resolves.toBe(48);
          // observers hear of a run after its answers are written (batch-scheduler.ts)
          await new Promise((resolve) => setImmediate(resolve));
          stop();
        } finally {
          await pipeline.close();
        }
        expect(runs, modelType).toEqual([[1, 48, 48]]); // batch 1, every position
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
