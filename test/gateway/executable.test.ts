import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { baseRuntimePath, executableEnv, hasBaseRuntime, warnIfNoBaseRuntime } from '../helpers/executables.ts';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';
import { MASTER_KEY } from './helpers/gateway.ts';

// The gateway inside the single executable (node:sqlite, pg, fastify and Hub bundled by esbuild into the SEA).
const available = hasBaseRuntime();
warnIfNoBaseRuntime('gateway in the single executable');
const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-sea-'));
let fake: FakeOpenAi;
let child: ChildProcess | null = null;

beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => {
  child?.kill('SIGKILL');
  await fake?.close();
  rmSync(dir, { recursive: true, force: true });
});

it.skipIf(!available)('encoder gateway serve from the base runtime forwards, records usage and stops cleanly on SIGTERM', async () => {
  const config = path.join(dir, 'gateway.yaml');
  writeFileSync(config, `log_level: warn\nproviders:\n  openai:\n    api_key: sk-test\n    api_base: ${fake.url}\n`);
  const database = path.join(dir, 'gateway.db');
  const running = spawn(baseRuntimePath(), ['gateway', 'serve', '--config', config, '--host', '127.0.0.1', '--port', '0', '--database-url', `sqlite:${database}`], {
    env: executableEnv({ cacheDir: path.join(dir, 'cache'), env: { GATEWAY_MASTER_KEY: MASTER_KEY } }),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child = running;
  let stderr = '';
  running.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => running.once('exit', resolve));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const match = /listening on (http:\/\/\S+)/.exec(stderr);
      if (match) {
        clearInterval(timer);
        resolve(match[1]);
      }
    }, 50);
    void exited.then((code) => {
      clearInterval(timer);
      reject(new Error(`exited with ${code}: ${stderr}`));
    });
  });
  const key = (await (
    await fetch(`${url}/v1/keys`, { method: 'POST', headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' }, body: '{"key_name":"sea"}' })
  ).json()) as { id: string; key: string };
  const client = new OpenAI({ apiKey: key.key, baseURL: `${url}/v1`, maxRetries: 0 });
  const completion = await client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] });
  expect(completion.choices[0].message.content).toBe('Hello world');
  const usage = (await (await fetch(`${url}/v1/keys/${key.id}/usage`, { headers: { 'x-hub-key': `Bearer ${MASTER_KEY}` } })).json()) as { totals: { requests: number } };
  expect(usage.totals.requests).toBe(1);
  running.kill('SIGTERM');
  expect(await exited).toBe(0);
  expect(stderr).toContain('stopped');
  child = null;
});
