/**
 * npm run bench:encoder — where the time of one batch goes, on a model shaped like all-MiniLM-L6-v2.
 *
 * Prints: tokenizer throughput (ours with offsets, the JS library alone, the Rust binding as reference);
 * softmax / L2 normalisation / mean pooling on 32x128x384 in TypeScript and through a Lua transform;
 * onnxruntime time for a 32-sequence batch against the whole predict pipeline, so the share of time spent
 * outside onnxruntime is visible (aim: under 10%).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Tokenizer as JsTokenizer } from '@huggingface/tokenizers';
import { parseBuildConfig } from '../src/encoder/config.ts';
import { readModelPackage } from '../src/encoder/model-package.ts';
import { OnnxModel } from '../src/encoder/onnx-model.ts';
import { PredictPipeline } from '../src/encoder/predict-pipeline.ts';
import { lpNormalize, meanPool, softmax, Tensor } from '../src/encoder/tensor.ts';
import { EncoderTokenizer } from '../src/encoder/tokenizer/index.ts';
import { LuaTransform } from '../src/encoder/transform/index.ts';
import { benchModelDir as modelDir, ensureBenchModel, repoRoot as root, sentence } from './workload.ts';
import { median, ms, printTable, time } from './measure.ts';


/** The longest text of `sentence` words (seeded) that encodes to at most `tokens` tokens, specials included. */
function textOfTokens(tokenizer: EncoderTokenizer, tokens: number, seed: number): string {
  let words = 1;
  while (tokenizer.encode(sentence(words + 1, seed)).ids.length <= tokens) words++;
  return sentence(words, seed);
}

async function main(): Promise<void> {
  await ensureBenchModel();
  const tokenizerJson = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8'));
  const tokenizerConfig = JSON.parse(readFileSync(path.join(modelDir, 'tokenizer_config.json'), 'utf8'));
  console.log(`node ${process.version}, ${process.platform}-${process.arch}; model: ${path.relative(root, modelDir)} (6 layers, hidden 384, vocab 30522)`);

  await tokenizerThroughput(tokenizerJson, tokenizerConfig);
  await tensorOperations();
  await batchBreakdown();
}

async function tokenizerThroughput(tokenizerJson: object, tokenizerConfig: object): Promise<void> {
  const ours = EncoderTokenizer.fromJson(tokenizerJson, tokenizerConfig);
  const library = new JsTokenizer(tokenizerJson, tokenizerConfig);
  const rust = await loadRustTokenizer();
  const rows: (string | number)[][] = [];
  for (const words of [8, 64, 256]) {
    const count = words === 256 ? 64 : 256;
    const texts = Array.from({ length: count }, (_, i) => sentence(words, i + 1));
    const perSecond = (t: { medianMs: number }) => Math.round((count / t.medianMs) * 1000);
    const oursTime = await time(() => ours.encodeBatch(texts), { runs: 9 });
    const libraryTime = await time(() => texts.map((t) => library.encode(t)), { runs: 9 });
    const rustTime = rust ? await time(() => Promise.all(texts.map((t) => rust.encode(t))), { runs: 9 }) : null;
    const tokens = ours.encode(texts[0]).ids.length;
    rows.push([
      words,
      tokens,
      perSecond(oursTime),
      perSecond(libraryTime),
      rustTime ? perSecond(rustTime) : 'n/a',
      `${(oursTime.medianMs / libraryTime.medianMs).toFixed(2)}x`,
    ]);
  }
  printTable(
    'Tokenizer throughput (sequences/s, median of 9 runs; higher is better)',
    ['words', 'tokens', 'ours: ids + offsets', '@huggingface/tokenizers: ids only', 'Rust tokenizers (N-API, reference)', 'ours / library time'],
    rows,
  );
}

async function loadRustTokenizer(): Promise<{ encode: (text: string) => Promise<unknown> } | null> {
  try {
    const { Tokenizer } = await import('tokenizers');
    const tokenizer = Tokenizer.fromFile(path.join(modelDir, 'tokenizer.json'));
    return { encode: (text) => tokenizer.encode(text) };
  } catch {
    return null; // a dev dependency; the table says n/a without it
  }
}

async function tensorOperations(): Promise<void> {
  const dims = [32, 128, 384];
  const data = new Float32Array(32 * 128 * 384).map((_, i) => Math.sin(i) * 3);
  const hidden = new Tensor(data, dims);
  const mask = new Tensor(new Float32Array(32 * 128).map((_, i) => (i % 128 < 100 ? 1 : 0)), [32, 128]);
  const lua = async (body: string) =>
    LuaTransform.create(`function Postprocess(arr, mask)\n${body}\nend`, { modelType: 'embedding' });
  const luaSoftmax = await lua('return arr:softmax(3)');
  const luaNormalize = await lua('return arr:lp_normalize(2, 3)');
  // The embedding contract wants [batch, seq, hidden] back, so the pooled tensor is computed and dropped.
  const luaPool = await lua('local pooled = arr:mean_pool(mask)\nreturn arr');
  const luaIdentity = await lua('return arr');

  const rows: (string | number)[][] = [];
  for (const [name, ts, viaLua] of [
    ['softmax (axis 3)', () => softmax(hidden, -1), () => luaSoftmax.run(hidden, mask)],
    ['L2 normalisation (axis 3)', () => lpNormalize(hidden, 2, -1), () => luaNormalize.run(hidden, mask)],
    ['mean pooling with mask', () => meanPool(hidden, mask), () => luaPool.run(hidden, mask)],
    ['identity (Lua call overhead)', () => hidden, () => luaIdentity.run(hidden, mask)],
  ] as const) {
    const a = await time(ts, { runs: 15 });
    const b = await time(viaLua, { runs: 15 });
    rows.push([name, ms(a.medianMs), ms(b.medianMs), ms(b.medianMs - a.medianMs)]);
  }
  printTable('Tensor operations on 32x128x384 (ms, median of 15 runs)', ['operation', 'TypeScript', 'Lua transform', 'Lua extra'], rows);
  for (const t of [luaSoftmax, luaNormalize, luaPool, luaIdentity]) t.close();
}

async function batchBreakdown(): Promise<void> {
  const config = parseBuildConfig(`encoder:\n  name: minilm\n  path: ${modelDir}\n  model_type: embedding\n`, { baseDir: root });
  const pkg = readModelPackage(config);
  const pipeline = await PredictPipeline.load(pkg);
  const model = await OnnxModel.load(pkg.weights, 'embedding');
  const texts = Array.from({ length: 32 }, (_, i) => textOfTokens(pipeline.tokenizer, 128, 1000 + i));
  const encodings = pipeline.tokenizer.encodeBatch(texts);
  const batch = pipeline.tokenizer.pad(encodings);

  const tokenize = await time(() => pipeline.tokenizer.pad(pipeline.tokenizer.encodeBatch(texts)), { runs: 7 });
  // onnxruntime alone and the whole predict, interleaved run by run so that noise from the shared machine hits
  // both alike; the share outside onnxruntime is the median of the per-pair differences.
  const runs: number[] = [];
  const predicts: number[] = [];
  const outsides: number[] = [];
  for (let i = 0; i < 9; i++) {
    const run = await time(() => model.run(batch), { runs: 1, warmup: i === 0 ? 2 : 0 });
    const predict = await time(() => pipeline.predict({ inputs: texts, normalize: true }), { runs: 1, warmup: i === 0 ? 2 : 0 });
    runs.push(run.medianMs);
    predicts.push(predict.medianMs);
    outsides.push(predict.medianMs - run.medianMs);
  }
  const response = await pipeline.predict({ inputs: texts, normalize: true });
  const serialise = await time(() => JSON.stringify(response), { runs: 7 });
  const [onnx, whole, outside] = [median(runs), median(predicts), median(outsides)];
  const share = (value: number) => `${((value / whole) * 100).toFixed(1)}%`;

  printTable(
    `One batch: 32 sequences x ${batch.sequenceLength} tokens, embedding with normalize (ms, median of 9 interleaved runs)`,
    ['step', 'ms', 'share of predict'],
    [
      ['tokenize + pad', ms(tokenize.medianMs), share(tokenize.medianMs)],
      ['onnxruntime run', ms(onnx), share(onnx)],
      ['whole predict (tokenize, run, normalise, shape results)', ms(whole), '100%'],
      ['outside onnxruntime (median of predict - run per pair)', ms(outside), share(outside)],
      ['JSON.stringify of the response (HTTP cost, not in predict)', ms(serialise.medianMs), '-'],
    ],
  );
  await model.close();
  await pipeline.close();
}

await main();
