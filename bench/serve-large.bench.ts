/**
 * npm run bench:serve-large — how long `GET /health` waits while `serve` (from source, one worker) handles one request
 * at the token limit (16,384 tokens): (a) per-token embeddings of the MiniLM-shaped model, 32 inputs of 512 tokens
 * (a ~74 MiB response); (b) ~1,900 short inputs to a tiny sequence classifier. /health is probed every 5 ms while the
 * request runs; each row is one request: its time, its response size, the probes, their median and worst latency.
 * The worst probe is what a liveness check with a short timeout would see (docs/http-api.md).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startListening, type ListeningExecutable } from '../test/helpers/executables.ts';
import { generateTinyModel } from '../test/helpers/generated-models.ts';
import { median, printTable, probeHealthUntil } from './measure.ts';
import { ensureBenchModel, repoRoot } from './workload.ts';

const REQUESTS = 3;

async function serve(work: string, name: string, modelDir: string, modelType: string): Promise<ListeningExecutable> {
  const config = path.join(work, `${name}.yaml`);
  writeFileSync(config, `encoder:\n  name: ${name}\n  path: ${modelDir}\n  model_type: ${modelType}\n`);
  const args = [path.join(repoRoot, 'src', 'cli', 'main.ts'), 'serve', '--config', config, '--http-hostname', '127.0.0.1', '--http-port', '0', '--disable-grpc', '--workers', '1'];
  return startListening(process.execPath, args, { cacheDir: path.join(work, 'cache') }, /HTTP +(http:\/\/\S+)/);
}

/** One request with /health probed every 5 ms until its whole response is in. */
async function probeDuring(url: string, body: string): Promise<(string | number)[]> {
  let done = false;
  const started = performance.now();
  const answered = fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(async (response) => {
    const text = await response.text();
    if (response.status !== 200) throw new Error(`predict: ${response.status} ${text.slice(0, 200)}`);
    return text.length;
  }).finally(() => {
    done = true; // a failed request ends the probing too
  });
  const probes = await probeHealthUntil(url, () => done);
  const chars = await answered;
  const seconds = (performance.now() - started) / 1000;
  return [seconds.toFixed(2), (chars / 2 ** 20).toFixed(1), probes.length, median(probes).toFixed(1), Math.max(...probes).toFixed(1)];
}

async function main(): Promise<void> {
  const work = mkdtempSync(path.join(os.tmpdir(), 'bench-serve-large-'));
  const rows: (string | number)[][] = [];
  try {
    const cases = [
      {
        label: 'per-token embeddings, MiniLM-shaped, 32 × 512 tokens',
        served: await serve(work, 'minilm', await ensureBenchModel(), 'embedding'),
        body: JSON.stringify({ inputs: Array.from({ length: 32 }, () => Array.from({ length: 500 }, (_, i) => ['alpha', 'beta', 'gamma', 'delta'][i % 4]).join(' ')), normalize: true }),
      },
      {
        label: 'sequence classification, tiny, 1,900 short inputs',
        served: await serve(work, 'tiny', await generateTinyModel({ modelType: 'sequence_classification', labels: ['no', 'yes'] }), 'sequence_classification'),
        body: JSON.stringify({ inputs: Array.from({ length: 1900 }, (_, i) => `word number ${i} here`) }),
      },
    ];
    for (const { label, served, body } of cases) {
      await (await fetch(`${served.address}/health`)).text();
      for (let i = 0; i < REQUESTS; i++) rows.push([label, i + 1, ...(await probeDuring(served.address, body))]);
      await served.stop();
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  printTable(
    `GET /health during one request at the token limit (serve from source, one worker, node ${process.version}, ${os.cpus().length} cores)`,
    ['request', 'run', 'request s', 'response MiB', '/health probes', 'median ms', 'worst ms'],
    rows,
  );
}

await main();
