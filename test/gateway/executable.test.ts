import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { selfSignedCertificate } from '../helpers/certificates.ts';
import { baseRuntimePath, hasBaseRuntime, startListening, warnIfNoBaseRuntime, type ListeningExecutable } from '../helpers/executables.ts';
import { ForwardProxy } from '../fakes/forward-proxy.ts';
import { chatChunks, chatCompletionBody, DEFAULT_COMPLETION_TEXT, FakeOpenAIServer } from '../fakes/openai-compatible.ts';
import { MASTER_KEY } from './helpers/gateway.ts';

// The gateway inside the single executable (node:sqlite, pg, fastify and Hub bundled by esbuild into the SEA).
const available = hasBaseRuntime();
warnIfNoBaseRuntime('gateway in the single executable');
const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-sea-'));
let fake: FakeOpenAIServer;
const children: ListeningExecutable[] = [];

beforeAll(async () => {
  fake = await FakeOpenAIServer.start();
});
afterAll(async () => {
  for (const child of children) await child.stop();
  await fake?.close();
  rmSync(dir, { recursive: true, force: true });
});

// gpt-fake is priced: require_pricing (on by default) refuses unpriced models
const PRICED = 'pricing:\n  openai:gpt-fake: {input_cost_per_million: 1, output_cost_per_million: 2}\n';

/** `encoder gateway serve` of the base runtime with this configuration, on SQLite, until the test's end. */
async function startGatewayExecutable(name: string, configText: string, env: NodeJS.ProcessEnv = {}): Promise<ListeningExecutable> {
  const config = path.join(dir, `${name}.yaml`);
  writeFileSync(config, configText);
  const running = await startListening(
    baseRuntimePath(),
    ['gateway', 'serve', '--config', config, '--host', '127.0.0.1', '--port', '0', '--database-url', `sqlite:${path.join(dir, `${name}.db`)}`],
    { cacheDir: path.join(dir, 'cache'), env: { GATEWAY_MASTER_KEY: MASTER_KEY, ...env } },
    /listening on (http:\/\/\S+)/,
  );
  children.push(running);
  return running;
}

async function createKey(url: string): Promise<{ id: string; key: string }> {
  const response = await fetch(`${url}/v1/keys`, { method: 'POST', headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' }, body: '{"key_name":"sea"}' });
  return (await response.json()) as { id: string; key: string };
}

it.skipIf(!available)('encoder gateway serve from the base runtime forwards, records usage, serves the dashboard and stops cleanly on SIGTERM', async () => {
  const running = await startGatewayExecutable('gateway', `log_level: warn\nproviders:\n  openai:\n    api_key: sk-test\n    api_base: ${fake.baseURL}\n${PRICED}`);
  const url = running.address;
  const key = await createKey(url);
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

// Found by `npm run soak -- --built`: the bundle is minified, and the gateway tells failures apart by their class
// names (Hub's errors and the vendor SDKs'), so a timeout answered 502 upstream_error instead of 504.
it.skipIf(!available)('tells provider failures apart as from source: a stall past upstream_timeout_seconds is 504 upstream_timeout, plain and streamed', async () => {
  const running = await startGatewayExecutable('timeouts', `log_level: warn\nupstream_timeout_seconds: 1\nproviders:\n  openai:\n    api_key: sk-test\n    api_base: ${fake.baseURL}\n${PRICED}`);
  const key = await createKey(running.address);
  const client = new OpenAI({ apiKey: key.key, baseURL: `${running.address}/v1`, maxRetries: 0 });
  const request = { model: 'openai:gpt-fake', messages: [{ role: 'user' as const, content: 'Hi' }] };

  fake.script('POST /v1/chat/completions', { delayMs: 5_000, then: { json: chatCompletionBody('gpt-fake') } });
  const plain = await client.chat.completions.create(request).catch((error: unknown) => error);
  expect(plain).toBeInstanceOf(OpenAI.APIError);
  expect((plain as InstanceType<typeof OpenAI.APIError>).status).toBe(504);
  expect((plain as InstanceType<typeof OpenAI.APIError>).code).toBe('upstream_timeout');

  // two events, then silence: the stream ends with an error event of type timeout_error
  fake.script('POST /v1/chat/completions', { sse: chatChunks('gpt-fake').slice(0, 2), hold: true });
  const streamed = await (async () => {
    for await (const _ of await client.chat.completions.create({ ...request, stream: true }));
  })().catch((error: unknown) => error);
  expect(streamed).toBeInstanceOf(OpenAI.APIError);
  expect((streamed as InstanceType<typeof OpenAI.APIError>).type).toBe('timeout_error');

  const usage = (await (await fetch(`${running.address}/v1/keys/${key.id}/usage`, { headers: { 'x-hub-key': `Bearer ${MASTER_KEY}` } })).json()) as {
    data: { status: string; status_code: number }[];
  };
  expect(usage.data.map((row) => [row.status, row.status_code])).toEqual([
    ['error', 504],
    ['error', 504],
  ]);
});

/** An HTTPS provider answering every call with a chat completion, its certificate from a private authority. */
async function startHttpsProvider(name: string): Promise<{ url: string; certFile: string; close: () => Promise<void> }> {
  const { key, cert, certFile } = selfSignedCertificate(dir, name);
  const server = https.createServer({ key, cert }, (request, response) => {
    request.resume().on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(chatCompletionBody('gpt-fake'))));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    certFile,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const chatRequest = { model: 'openai:gpt-fake', messages: [{ role: 'user' as const, content: 'Hi' }] };
const providerConfig = (apiBase: string) => `log_level: warn\nproviders:\n  openai:\n    api_key: sk-test\n    api_base: ${apiBase}/v1\n${PRICED}`;
async function clientOf(gateway: ListeningExecutable): Promise<OpenAI> {
  return new OpenAI({ apiKey: (await createKey(gateway.address)).key, baseURL: `${gateway.address}/v1`, maxRetries: 0 });
}

// Providers are HTTPS; a self-hosted one may have a certificate from a private authority, which Node's own
// NODE_EXTRA_CA_CERTS makes trusted (docs/gateway.md). Without it the call fails, and says TLS's reason.
it.skipIf(!available)('forwards to an HTTPS provider whose authority NODE_EXTRA_CA_CERTS names, and refuses it without', async () => {
  const provider = await startHttpsProvider('private-authority');
  try {
    const trusting = await startGatewayExecutable('private-ca', providerConfig(provider.url), { NODE_EXTRA_CA_CERTS: provider.certFile });
    expect((await (await clientOf(trusting)).chat.completions.create(chatRequest)).choices[0].message.content).toBe(DEFAULT_COMPLETION_TEXT);

    const doubting = await startGatewayExecutable('no-private-ca', providerConfig(provider.url));
    const failure = (await (await clientOf(doubting)).chat.completions.create(chatRequest).catch((error: unknown) => error)) as InstanceType<typeof OpenAI.APIError>;
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect([failure.status, failure.code]).toEqual([502, 'upstream_error']);
    expect(failure.message).toContain('(DEPTH_ZERO_SELF_SIGNED_CERT)');
  } finally {
    await provider.close();
  }
});

// A company network lets the gateway out only through its proxy: Node's switch (NODE_USE_ENV_PROXY=1) and the usual
// HTTPS_PROXY / NO_PROXY, as for Node's own fetch (docs/gateway.md).
it.skipIf(!available)('with NODE_USE_ENV_PROXY=1, calls the provider through HTTPS_PROXY (a CONNECT tunnel); not without', async () => {
  const provider = await startHttpsProvider('behind-proxy');
  const proxy = await ForwardProxy.start();
  try {
    const env = { NODE_EXTRA_CA_CERTS: provider.certFile, HTTPS_PROXY: proxy.url };
    const proxied = await startGatewayExecutable('proxied', providerConfig(provider.url), { ...env, NODE_USE_ENV_PROXY: '1' });
    expect((await (await clientOf(proxied)).chat.completions.create(chatRequest)).choices[0].message.content).toBe(DEFAULT_COMPLETION_TEXT);
    expect(proxy.requests).toEqual([`CONNECT ${new URL(provider.url).host}`]);

    const direct = await startGatewayExecutable('not-proxied', providerConfig(provider.url), env);
    expect((await (await clientOf(direct)).chat.completions.create(chatRequest)).choices[0].message.content).toBe(DEFAULT_COMPLETION_TEXT);
    expect(proxy.requests).toHaveLength(1);
  } finally {
    await proxy.close();
    await provider.close();
  }
});
