import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { baseRuntimePath, hasBaseRuntime, startListening, warnIfNoBaseRuntime, type ListeningExecutable } from '../helpers/executables.ts';
import { DEFAULT_COMPLETION_TEXT, FakeOpenAIServer } from '../fakes/openai-compatible.ts';
import { MASTER_KEY } from './helpers/gateway.ts';

// The gateway inside the single executable (node:sqlite, pg, fastify and Hub bundled by esbuild into the SEA).
const available = hasBaseRuntime();
warnIfNoBaseRuntime('gateway in the single executable');
const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-sea-'));
let fake: FakeOpenAIServer;
let child: ListeningExecutable | undefined;

beforeAll(async () => {
  fake = await FakeOpenAIServer.start();
});
afterAll(async () => {
  await child?.stop();
  await fake?.close();
  rmSync(dir, { recursive: true, force: true });
});

it.skipIf(!available)('encoder gateway serve from the base runtime forwards, records usage, serves the dashboard and stops cleanly on SIGTERM', async () => {
  const config = path.join(dir, 'gateway.yaml');
  writeFileSync(config, `log_level: warn\nproviders:\n  openai:\n    api_key: sk-test\n    api_base: ${fake.baseURL}\n`);
  const database = path.join(dir, 'gateway.db');
  const running = await startListening(
    baseRuntimePath(),
    ['gateway', 'serve', '--config', config, '--host', '127.0.0.1', '--port', '0', '--database-url', `sqlite:${database}`],
    { cacheDir: path.join(dir, 'cache'), env: { GATEWAY_MASTER_KEY: MASTER_KEY } },
    /listening on (http:\/\/\S+)/,
  );
  child = running;
  const url = running.address;
  const key = (await (
    await fetch(`${url}/v1/keys`, { method: 'POST', headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' }, body: '{"key_name":"sea"}' })
  ).json()) as { id: string; key: string };
  const client = new OpenAI({ apiKey: key.key, baseURL: `${url}/v1`, maxRetries: 0 });
  const completion = await client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] });
  expect(completion.choices[0].message.content).toBe(DEFAULT_COMPLETION_TEXT);
  const usage = (await (await fetch(`${url}/v1/keys/${key.id}/usage`, { headers: { 'x-hub-key': `Bearer ${MASTER_KEY}` } })).json()) as { totals: { requests: number } };
  expect(usage.totals.requests).toBe(1);
  // the dashboard's files are SEA assets of the executable
  const page = await fetch(`${url}/dashboard/`);
  expect(page.status).toBe(200);
  expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
  expect(await page.text()).toContain('<script src="/dashboard/dashboard.js" defer></script>');
  const script = await fetch(`${url}/dashboard/dashboard.js`);
  expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
  expect((await script.text()).length).toBeGreaterThan(10_000);
  expect(await running.stop()).toBe(0);
  expect(running.stderr()).toContain('stopped');
});
