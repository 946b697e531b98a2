/**
 * node bench/bare-embeddings-server.ts <model dir> — the least an HTTP embeddings server can be in Node: node:http,
 * the body parsed and tokenized on the main thread, one worker thread running onnxruntime (its default threads) with
 * mean pooling and normalisation, JSON.stringify of OpenAI's response. No validation, limits, batching, metrics or
 * anything else a server needs. bench:serve measures it beside raw onnxruntime and `serve` (row (e)) so that the cost
 * of being an HTTP server on this machine at all is measured, apart from the cost of this server's own work.
 * Prints `listening <url>` on stderr once its session is loaded.
 */
import http from 'node:http';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { parseBuildConfig } from '../src/encoder/config.ts';
import { readModelPackage } from '../src/encoder/model-package.ts';
import { normalizeInPlace, poolTokens } from '../src/encoder/pooling.ts';
import { Tensor } from '../src/encoder/tensor.ts';
import { EncoderTokenizer, type PaddedBatch } from '../src/encoder/tokenizer/index.ts';

interface RunRequest {
  id: number;
  batch: PaddedBatch;
}

async function worker(weights: Uint8Array): Promise<void> {
  const session = await ort.InferenceSession.create(weights, { graphOptimizationLevel: 'all' });
  parentPort!.on('message', async ({ id, batch }: RunRequest) => {
    const dims = [batch.batchSize, batch.sequenceLength];
    const outputs = await session.run({
      input_ids: new ort.Tensor('int64', batch.inputIds, dims),
      attention_mask: new ort.Tensor('int64', batch.attentionMask, dims),
      token_type_ids: new ort.Tensor('int64', batch.tokenTypeIds, dims),
    });
    const hidden = outputs.last_hidden_state;
    const vectors = poolTokens(new Tensor(hidden.data as Float32Array, hidden.dims.map(Number)), new Tensor(Float32Array.from(batch.attentionMask, Number), dims), 'mean');
    const width = vectors.dims[1];
    for (let row = 0; row < dims[0]; row++) normalizeInPlace(vectors.data.subarray(row * width, (row + 1) * width));
    parentPort!.postMessage({ id, data: vectors.data, width }, [vectors.data.buffer as ArrayBuffer]);
  });
  parentPort!.postMessage('loaded');
}

async function server(modelDir: string): Promise<void> {
  const pkg = readModelPackage(parseBuildConfig(`encoder:\n  name: bare\n  path: ${modelDir}\n  model_type: sentence_embedding\n`, { baseDir: modelDir }));
  const tokenizer = EncoderTokenizer.fromJson(pkg.tokenizerJson, pkg.tokenizerConfig);
  const thread = new Worker(new URL(import.meta.url), { workerData: { weights: pkg.weights } });
  await new Promise((resolve) => thread.once('message', resolve));
  const waiting = new Map<number, (answer: { data: Float32Array; width: number }) => void>();
  thread.on('message', (answer: { id: number; data: Float32Array; width: number }) => {
    waiting.get(answer.id)?.(answer);
    waiting.delete(answer.id);
  });
  let nextId = 0;
  const embed = (texts: string[]) =>
    new Promise<{ data: Float32Array; width: number }>((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      thread.postMessage({ id, batch: tokenizer.pad(tokenizer.encodeBatch(texts)) } satisfies RunRequest);
    });
  const listener = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', async () => {
      const input = (JSON.parse(Buffer.concat(chunks).toString()) as { input: string | string[] }).input;
      const texts = typeof input === 'string' ? [input] : input;
      const { data, width } = await embed(texts);
      const body = JSON.stringify({
        object: 'list',
        data: texts.map((_, index) => ({ object: 'embedding', index, embedding: Array.from(data.subarray(index * width, (index + 1) * width)) })),
        model: 'bare',
        usage: { prompt_tokens: 0, total_tokens: 0 },
      });
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      response.end(body);
    });
  });
  listener.listen(0, '127.0.0.1', () => {
    const address = listener.address() as { port: number };
    process.stderr.write(`listening http://127.0.0.1:${address.port}\n`);
  });
  process.on('SIGTERM', () => process.exit(0));
}

if (isMainThread) await server(process.argv[2]);
else await worker((workerData as { weights: Uint8Array }).weights);
