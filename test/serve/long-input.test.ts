/**
 * An input of 8 MiB, as large as serve's default body limit admits, truncated to the model length: `GET /health` of
 * `serve` keeps answering within 50 ms while it is processed (the tokenizer used to hold the event loop for seconds on
 * it before keeping 512 tokens). `serve` runs from source in a child process, so the probes measure the server alone.
 *
 * One piece of the work cannot be split: JSON.parse of the 8 MiB body (~15 ms on an idle core). The machine that runs
 * the tests is shared, and under load every step takes several times longer, so the bound is 50 ms or, when parsing
 * the same body here takes longer than 10 ms, 50 ms plus three times that parse (the server waits for its core as
 * this process does: its parse and the turns around it stretch alike). A burst of load from elsewhere can still stretch
 * one probe past the bound, so the measure is taken up to three times, and one round within the bound passes. Before the
 * tokenizer stopped at the truncation the probes waited seconds: every round fails on such work. (Smaller whole-text
 * walks have their own tests: the request validators measure texts by `.length`, test/shared/built-in-schemas.test.ts.)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startListening, type ListeningExecutable } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

const BODY_LIMIT = 8 * 2 ** 20; // serve's default --body-limit
const ROUNDS = 3;
const SENTENCE = 'the quick brown fox jumps over the lazy dog while the model server tokenizes a very long input ';

const work = mkdtempSync(path.join(os.tmpdir(), 'long-input-'));
let served: ListeningExecutable;
let url: string;

beforeAll(async () => {
  const dir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['no', 'yes'] });
  const config = path.join(work, 'long.yaml');
  writeFileSync(config, `encoder:\n  name: long\n  path: ${dir}\n  model_type: sequence_classification\n`);
  const args = [path.join(repoRoot, 'src', 'cli', 'main.ts'), 'serve', '--config', config, '--http-hostname', '127.0.0.1', '--http-port', '0', '--disable-grpc'];
  served = await startListening(process.execPath, args, { cacheDir: path.join(work, 'cache') }, /HTTP +(http:\/\/\S+)/);
  url = served.address;
}, 90_000);

afterAll(async () => {
  await served?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('serve with a single 8 MiB input', () => {
  it('answers it, while GET /health answers within 50 ms all along (a bound scaled when the machine is busy)', { timeout: 60_000 }, async () => {
    const input = SENTENCE.repeat(Math.ceil(BODY_LIMIT / SENTENCE.length)).slice(0, BODY_LIMIT - 64);
    const body = Buffer.from(JSON.stringify({ inputs: [input] }));
    expect(body.length).toBeLessThanOrEqual(BODY_LIMIT);
    // first calls pay for connections and compilation: not what is measured
    await (await fetch(`${url}/health`)).text();
    await (await post('{"inputs":["warm up"]}')).text();

    const rounds: Round[] = [];
    while (rounds.length < ROUNDS && !rounds.some(withinBound)) rounds.push(await probeHealthWhilePredicting(body));
    const trace = rounds.map((round) => `health latencies (ms): ${round.latencies.map((l) => l.toFixed(1)).join(' ')}; bound ${round.bound.toFixed(1)} ms`);
    expect(rounds.some(withinBound), trace.join('\n')).toBe(true);
  });
});

const post = (payload: Buffer | string) => fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: payload });

interface Round {
  latencies: number[];
  bound: number;
}

const withinBound = (round: Round) => Math.max(...round.latencies) < round.bound;

/** Posts the body and probes /health until the answer is in; the answer must be the model's. */
async function probeHealthWhilePredicting(body: Buffer): Promise<Round> {
  const parseStarted = performance.now();
  JSON.parse(body.toString('utf8'));
  const parseMs = performance.now() - parseStarted;
  const bound = parseMs <= 10 ? 50 : 50 + 3 * parseMs;

  let done = false;
  const predicted = post(body).then(async (response) => {
    const text = await response.text();
    done = true;
    return { status: response.status, text };
  });
  const latencies: number[] = [];
  while (!done) {
    const started = performance.now();
    const health = await fetch(`${url}/health`);
    expect(await health.json()).toBe('OK!');
    latencies.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const { status, text } = await predicted;
  expect(status, text).toBe(200);
  const result = JSON.parse(text) as { results: { scores: number[] }[] };
  expect(result.results).toHaveLength(1);
  expect(result.results[0].scores).toHaveLength(2);
  expect(latencies.length).toBeGreaterThan(0);
  return { latencies, bound };
}
