import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/gateway/storage/index.ts';
import { CHAT_USAGE, FakeOpenAIServer } from '../fakes/openai-compatible.ts';
import { CHAT_COST, MASTER_KEY, TEST_PRICING, postgresBackend, sqliteBackend, startTestGateway, type Backend } from './helpers/gateway.ts';
import { spawnGateway as spawnChild } from './helpers/gateway-process.ts';

const backends: Backend[] = [sqliteBackend(), await postgresBackend()];
const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-crash-'));
let fake: FakeOpenAIServer;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  // Keeps no requests: the load test sends thousands and reads none.
  fake = await FakeOpenAIServer.start({ record: false });
});
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await fake?.close();
  await Promise.all(backends.map((backend) => backend.close()));
  rmSync(dir, { recursive: true, force: true });
});

async function spawnGateway(databaseUrl: string): Promise<{ child: ChildProcess; url: string }> {
  const { child, url } = await spawnChild({ databaseUrl, dir, providerUrl: fake.baseURL });
  children.add(child);
  return { child, url };
}

describe.each(backends)('durability on $name', (backend) => {
  it.skipIf(backend.skipReason)('SIGKILL under load: every request answered 200 before the kill has its usage row', async () => {
    const databaseUrl = await backend.newDatabaseUrl();
    const { child, url } = await spawnGateway(databaseUrl);
    const manage = async (path: string, body: unknown) =>
      (await (
        await fetch(`${url}${path}`, { method: 'POST', headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
      ).json()) as Record<string, string>;
    const budget = await manage('/v1/budgets', { max_budget: 1000 });
    const key = await manage('/v1/keys', { key_name: 'load', budget_id: budget.budget_id });

    const answered: string[] = [];
    let failed = 0;
    let killed = false;
    let sequence = 0;
    const worker = async () => {
      while (!killed) {
        const id = `crash-${++sequence}`;
        try {
          const response = await fetch(`${url}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json', 'x-request-id': id },
            body: JSON.stringify({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'Hi' }] }),
          });
          await response.arrayBuffer();
          if (response.status === 200) answered.push(id);
        } catch {
          failed++;
        }
      }
    };
    const workers = Array.from({ length: 16 }, worker);
    // Kill once a few hundred calls have been answered, while 16 more are in flight.
    while (answered.length < 300) await new Promise((resolve) => setTimeout(resolve, 10));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    killed = true;
    await Promise.all(workers);
    children.delete(child);

    const store = openStore(databaseUrl);
    try {
      const rows = await store.driver.all('SELECT request_id FROM usage WHERE key_id = ?', [key.id]);
      const recorded = new Set(rows.map((row) => String(row.request_id)));
      const missing = answered.filter((id) => !recorded.has(id));
      expect(missing).toEqual([]);
      expect(recorded.size).toBeGreaterThanOrEqual(answered.length);
      const [held] = await store.driver.all('SELECT reserved_nanos FROM budgets WHERE budget_id = ?', [budget.budget_id]);
      console.info(
        `${backend.name}: ${answered.length} answered 200 before SIGKILL, ${recorded.size} usage rows, ${failed} requests cut by the kill, ${Number(held.reserved_nanos)} nano-dollars left held`,
      );
    } finally {
      await store.close();
    }

    // The next gateway on the database gives back the dead one's holds (SQLite: at start; PostgreSQL: once its
    // lease of 1 s has run out), and the budget's spend is exactly the sum of its usage rows.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const next = await startTestGateway(databaseUrl, { instanceLeaseSeconds: 1 });
    try {
      const after = (await next.call('GET', `/v1/budgets/${budget.budget_id}`)).json;
      expect(after.reserved).toBe(0);
      const usage = (await next.call('GET', `/v1/keys/${key.id}/usage?limit=1`)).json;
      expect(after.spend).toBeCloseTo(usage.totals.cost, 9);
    } finally {
      await next.close();
    }
  });

  it.skipIf(backend.skipReason || backend.name !== 'postgres')('two instances on one PostgreSQL share keys and keep one consistent spend', async () => {
    const databaseUrl = await backend.newDatabaseUrl();
    const providers = { openai: { api_key: 'sk-test', api_base: fake.baseURL } };
    const pricing = { 'openai:gpt-fake': TEST_PRICING };
    const [a, b] = await Promise.all([startTestGateway(databaseUrl, { providers, pricing }), startTestGateway(databaseUrl, { providers, pricing })]);
    try {
      // Made on A, used on B.
      const budget = (await a.call('POST', '/v1/budgets', { body: { max_budget: 20 * CHAT_COST } })).json;
      const key = (await a.call('POST', '/v1/keys', { body: { key_name: 'shared', budget_id: budget.budget_id } })).json;
      const clients = [a, b].map((gateway) => new OpenAI({ apiKey: key.key, baseURL: `${gateway.url}/v1`, maxRetries: 0 }));
      const prompt = 'Please answer this question briefly and politely.';
      const results = await Promise.allSettled(
        Array.from({ length: 120 }, (_, i) =>
          clients[i % 2].chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: prompt }], max_tokens: CHAT_USAGE.completion_tokens }),
        ),
      );
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      // CHAT_COST per call against 20 times that: at most 20 + 1, whichever instance served them.
      expect(ok).toBeGreaterThanOrEqual(1);
      expect(ok).toBeLessThanOrEqual(21);
      const [fromA, fromB] = await Promise.all([a.call('GET', `/v1/budgets/${budget.budget_id}`), b.call('GET', `/v1/budgets/${budget.budget_id}`)]);
      expect(fromA.json.spend).toBe(fromB.json.spend);
      expect(fromA.json.reserved).toBe(0);
      const usage = (await b.call('GET', `/v1/keys/${key.id}/usage?limit=1000`)).json;
      expect(usage.data.filter((row: { status: string }) => row.status === 'success')).toHaveLength(ok);
      expect(usage.data.filter((row: { reason: string }) => row.reason === 'budget_exceeded')).toHaveLength(120 - ok);
      expect(fromA.json.spend).toBeCloseTo(usage.totals.cost, 10);
      expect(fromA.json.spend).toBeLessThanOrEqual(21 * CHAT_COST + 1e-12);
      // Deactivated on B, refused on A.
      await b.call('PATCH', `/v1/keys/${key.id}`, { body: { is_active: false } });
      await expect(clients[0].models.list()).rejects.toMatchObject({ status: 401, code: 'key_inactive' });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
