/**
 * No request can stall the server (issue 30): four parallel inputs of 7.9 MiB — dots, CJK, one word, emoji — over
 * HTTP, and the same four over gRPC (its message limit follows --body-limit, 8 MiB), to a model with a byte-level BPE tokenizer
 * (the costliest family on such text: seconds to minutes per input before the tokenizer bounded its work), while
 * `/health` is probed every 20 ms: p99 under 50 ms and no probe over 200 ms. A minute later at most, the server's
 * RSS is back within 1.5x of what it was idle. `serve` runs from source in a child process, so the probes and the
 * RSS measure the server alone.
 *
 * The machine that runs the tests is shared: a burst of load from elsewhere can stretch probes, so the measure is
 * taken up to three times, and one round within the bounds passes. Before the tokenizer thread and the bounded
 * tokenizer, every round failed by seconds; before the large texts were held apart from the event loop's heap and
 * malloc was told to give megabytes back (docs/decisions.md), by 100–200 ms and hundreds of MiB.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRESETS, writeModelDirectory } from '../../scripts/model-generator/index.ts';
import { startListening, type ListeningExecutable } from '../helpers/executables.ts';
import { grpcClient } from '../helpers/served-model.ts';
import { hasTokenizerFixtures, tokenizersDir } from '../helpers/tokenizer-fixtures.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

const HTTP_INPUT = Math.floor(7.9 * 2 ** 20);
const GRPC_INPUT = HTTP_INPUT - 64;
const ROUNDS = 3;
/** Waves of the eight requests per round: enough probes (a hundred or more) for a p99 that is not just the maximum. */
const WAVES = 4;

const SHAPES: Record<string, (units: number) => string> = {
  dots: (n) => '.'.repeat(n),
  cjk: (n) => '中文字'.repeat(Math.floor(n / 9)), // 3 UTF-8 bytes each
  'one word': (n) => 'a'.repeat(n),
  emoji: (n) => '😀'.repeat(Math.floor(n / 4)), // 4 UTF-8 bytes each
};

const work = mkdtempSync(path.join(os.tmpdir(), 'hostile-input-'));
let served: ListeningExecutable;
let httpUrl: string;
let grpcAddress: string;

if (!hasTokenizerFixtures) console.warn('hostile input: skipped, ../shared/tokenizers is missing (the byte-level BPE tokenizer)');
const runs = hasTokenizerFixtures;

beforeAll(async () => {
  if (!runs) return;
  // a tiny BERT whose vocabulary covers RoBERTa's byte-level BPE ids
  const dir = path.join(work, 'model');
  await writeModelDirectory(dir, { ...PRESETS.tiny, modelType: 'sentence_embedding', vocabSize: 50_304 });
  for (const file of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(path.join(tokenizersDir, 'bpe-bytelevel-roberta', file), path.join(dir, file));
  const config = path.join(work, 'hostile.yaml');
  writeFileSync(config, `encoder:\n  name: hostile\n  path: ${dir}\n  model_type: sentence_embedding\n`);
  const args = [path.join(repoRoot, 'src', 'cli', 'main.ts'), 'serve', '--config', config, '--http-hostname', '127.0.0.1', '--http-port', '0', '--grpc-port', '0', '--shutdown-grace', '0'];
  served = await startListening(process.execPath, args, { cacheDir: path.join(work, 'cache') }, /HTTP +(http:\/\/\S+)/);
  httpUrl = served.address;
  grpcAddress = /gRPC +(\S+)/.exec(served.stderr())![1];
}, 120_000);

afterAll(async () => {
  await served?.stop();
  rmSync(work, { recursive: true, force: true });
});

const rssMiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${served.child.pid}/status`, 'utf8'))![1]) / 1024;

const embed = (body: string) => fetch(`${httpUrl}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });

interface Round {
  latencies: number[];
  p99: number;
  max: number;
}

/**
 * Probes `url` every 20 ms from a thread of its own until told to stop, and answers each probe's latency measured
 * from when it was due, as a prober with a period sees it. On its own thread, the probes measure the server and not
 * this process, whose event loop builds and sends megabytes of requests meanwhile.
 */
const PROBER = `
const { parentPort, workerData } = require('node:worker_threads');
let stop = false;
parentPort.on('message', () => (stop = true));
(async () => {
  // the thread's first fetch loads and connects its HTTP client (50-130 ms): not a probe of the server
  await (await fetch(workerData.url)).text();
  parentPort.postMessage('ready');
  const latencies = [];
  let due = performance.now();
  while (!stop) {
    const response = await fetch(workerData.url);
    if (response.status !== 200) throw new Error('/health answered ' + response.status);
    await response.text();
    latencies.push(performance.now() - due);
    due += 20;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
    due = Math.max(due, performance.now());
  }
  parentPort.postMessage(latencies);
})();
`;

function probe(url: string): { ready: () => Promise<void>; stop: () => Promise<number[]> } {
  const worker = new Worker(PROBER, { eval: true, workerData: { url } });
  const messages: unknown[] = [];
  let heard: () => void = () => {};
  worker.on('message', (message) => {
    messages.push(message);
    heard();
  });
  const next = () => new Promise<unknown>((resolve, reject) => {
    worker.once('error', reject);
    const take = () => (messages.length > 0 ? resolve(messages.shift()) : (heard = take));
    take();
  });
  return {
    ready: async () => {
      expect(await next()).toBe('ready');
    },
    stop: async () => {
      worker.postMessage('stop');
      const latencies = (await next()) as number[];
      await worker.terminate();
      return latencies;
    },
  };
}

/** Sends every hostile input over both front ends at once, WAVES times, while /health is probed. */
async function round(grpc: ReturnType<typeof grpcClient>, httpBodies: string[], grpcInputs: string[]): Promise<Round> {
  const wave = () => Promise.all([
    ...httpBodies.map(async (body) => {
      const response = await embed(body);
      const answer = (await response.json()) as { data: { embedding: number[] }[]; usage: { prompt_tokens: number } };
      expect(response.status, JSON.stringify(answer).slice(0, 300)).toBe(200);
      expect(answer.data[0].embedding.length).toBeGreaterThan(0);
      expect(answer.usage.prompt_tokens).toBeGreaterThan(2);
    }),
    ...grpcInputs.map(async (input) => {
      const reply = (await grpc.predict({ inputs: [input] })) as { results: unknown[] };
      expect(reply.results).toHaveLength(1);
    }),
  ]);
  const prober = probe(`${httpUrl}/health`);
  await prober.ready();
  const failure = await (async () => {
    for (let k = 0; k < WAVES; k++) await wave();
  })().then(() => null, (error: unknown) => error);
  const latencies = await prober.stop();
  if (failure !== null) throw failure;
  const sorted = [...latencies].sort((a, b) => a - b);
  return { latencies, p99: sorted[Math.floor(sorted.length * 0.99)] ?? 0, max: sorted.at(-1) ?? 0 };
}

describe.skipIf(!runs)('serve under hostile input', () => {
  it('keeps /health within p99 50 ms (none over 200 ms) and gives its memory back', { timeout: 300_000 }, async () => {
    const grpc = grpcClient(grpcAddress, 'sentence_embedding');
    try {
      // first calls pay for connections and compilation
      expect((await embed(JSON.stringify({ input: 'warm up' }))).status).toBe(200);
      await grpc.predict({ inputs: ['warm up'] });
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const idle = rssMiB();

      const rounds: Round[] = [];
      const within = (r: Round) => r.p99 < 50 && r.max < 200;
      const httpBodies = Object.values(SHAPES).map((make) => JSON.stringify({ input: make(HTTP_INPUT) }));
      const grpcInputs = Object.values(SHAPES).map((make) => make(GRPC_INPUT));
      while (rounds.length < ROUNDS && !rounds.some(within)) rounds.push(await round(grpc, httpBodies, grpcInputs));
      const trace = rounds.map((r) => `${r.latencies.length} probes, p99 ${r.p99.toFixed(1)} ms, max ${r.max.toFixed(1)} ms`);
      console.info(`hostile input: ${trace.join('; ')}`);
      expect(rounds.some(within), trace.join('\n')).toBe(true);
      expect(rounds.every((r) => r.latencies.length >= 20), trace.join('\n')).toBe(true);

      const rss: number[] = [];
      const deadline = performance.now() + 60_000;
      do {
        rss.push(rssMiB());
        if (rss.at(-1)! <= 1.5 * idle) break;
        await new Promise((resolve) => setTimeout(resolve, 2000));
      } while (performance.now() < deadline);
      console.info(`hostile input: RSS idle ${idle.toFixed(0)} MiB, then ${rss.map((r) => r.toFixed(0)).join(' ')} MiB`);
      expect(rss.at(-1)!, `idle ${idle.toFixed(0)} MiB, then ${rss.map((r) => r.toFixed(0)).join(' ')} MiB`).toBeLessThanOrEqual(1.5 * idle);
    } finally {
      grpc.close();
    }
  });
});
