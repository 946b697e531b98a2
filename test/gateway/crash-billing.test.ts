import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { chatChunks, chatCompletionBody, type RecordedRequest } from '../fakes/openai-compatible.ts';
import { TEST_PRICING, eventually, useBackends, useFakeProvider } from './helpers/gateway.ts';
import { manage, spawnGateway, type GatewayChild } from './helpers/gateway-process.ts';

/**
 * Write-ahead usage: a gateway killed (SIGKILL) with plain and streamed calls in flight that the provider has served,
 * then started again on the same database. Every call the provider received has exactly one row, the killed ones
 * `interrupted` and charged (a plain call at its hold, a stream at what it had delivered), and each budget's spend is
 * the sum of the rows with nothing left reserved.
 */
const backends = await useBackends();
const fake = await useFakeProvider();
const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-wal-'));
const children: GatewayChild[] = [];
afterAll(async () => {
  for (const child of children) await child.kill();
  rmSync(dir, { recursive: true, force: true });
});

const MAX_TOKENS = 50;
/** Many small pieces: a stream that has sent a few before the provider stalls has delivered well below its hold. */
const PIECES = Array.from({ length: 40 }, (_, i) => ` piece${i}`);
const SENT_BEFORE_STALL = 6;
/** The request id the client sent, carried in the message so the provider's requests can be matched to rows. */
const idOf = (request: RecordedRequest) => /call ([\w-]+)/.exec(JSON.stringify(request.body))?.[1];

describe.each(backends)('write-ahead usage on $name', (backend) => {
  it.skipIf(backend.skipReason)('kill -9 with plain and streamed calls in flight: every served call has one row, spend = rows, no hold left', async () => {
    const databaseUrl = await backend.newDatabaseUrl();
    fake.reset();
    // Calls marked "finish" are answered at once; the others are held by the provider until the gateway dies: plain
    // ones get no answer, streams send some chunks and then stall.
    fake.handle('POST /v1/chat/completions', (request) => {
      const body = request.body as { model: string; stream?: boolean };
      const finish = JSON.stringify(body).includes('finish');
      if (body.stream) return finish ? { sse: chatChunks(body.model, PIECES) } : { sse: chatChunks(body.model, PIECES).slice(0, 1 + SENT_BEFORE_STALL), hold: true };
      return finish ? { json: chatCompletionBody(body.model) } : { delayMs: 60_000, then: { json: chatCompletionBody(body.model) } };
    });
    const first = await spawnGateway({ databaseUrl, dir, providerUrl: fake.baseURL });
    children.push(first);
    const ownerBudget = await manage(first.url, 'POST', '/v1/budgets', { max_budget: 1000 });
    const keyBudget = await manage(first.url, 'POST', '/v1/budgets', { max_budget: 1000 });
    await manage(first.url, 'POST', '/v1/users', { user_id: 'owner', alias: 'Owner', budget_id: ownerBudget.budget_id });
    const key = await manage(first.url, 'POST', '/v1/keys', { key_name: 'wal', user_id: 'owner', budget_id: keyBudget.budget_id });
    const client = new OpenAI({ apiKey: key.key, baseURL: `${first.url}/v1`, maxRetries: 0, timeout: 30_000 });
    const body = (id: string) => ({ model: 'openai:gpt-fake', messages: [{ role: 'user' as const, content: `call ${id}` }], max_tokens: MAX_TOKENS });
    const plain = (id: string) => client.chat.completions.create(body(id), { headers: { 'x-request-id': id } });
    const stream = (id: string) => client.chat.completions.create({ ...body(id), stream: true }, { headers: { 'x-request-id': id } });

    // Calls that finish before the kill: their rows must not be counted again.
    for (let i = 0; i < 3; i++) await plain(`finish-plain-${i}`);
    for (let i = 0; i < 2; i++) for await (const _ of await stream(`finish-stream-${i}`));

    // 6 plain and 6 streamed calls in flight; each stream has received its first chunks.
    const inFlight: Promise<unknown>[] = [];
    for (let i = 0; i < 6; i++) inFlight.push(plain(`plain-${i}`).catch(() => 'cut'));
    const streamed = Array.from({ length: 6 }, async (_, i) => {
      let chunks = 0;
      try {
        for await (const _ of await stream(`stream-${i}`)) chunks++;
      } catch {
        // cut by the kill
      }
      return chunks;
    });
    const streamedSoFar = () => fake.requests.filter((r) => idOf(r)?.startsWith('stream-')).length;
    await eventually(() => (fake.requests.filter((r) => /^(plain|stream)-/.test(idOf(r) ?? '')).length === 12 ? true : undefined), 'the provider to receive the 12 calls');
    expect(streamedSoFar()).toBe(6);
    // Longer than the progress interval (1 s): what the streams delivered is on their rows.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await first.kill();
    const chunksSeen = await Promise.all(streamed);
    await Promise.all(inFlight);
    expect(chunksSeen.every((n) => n >= SENT_BEFORE_STALL - 1)).toBe(true);

    // PostgreSQL: the dead instance is reaped once its lease (1 s) has run out; SQLite: at start.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const second = await spawnGateway({ databaseUrl, dir, providerUrl: fake.baseURL });
    children.push(second);
    try {
      const { data: rows } = await manage(second.url, 'GET', '/v1/usage?limit=1000');
      const served = fake.requests.map(idOf).filter((id): id is string => id !== undefined);
      expect(served).toHaveLength(17);
      const rowsOf = (id: string) => rows.filter((row: { request_id: string }) => row.request_id === id);
      for (const id of served) expect(rowsOf(id), id).toHaveLength(1);
      expect(rows).toHaveLength(17);
      for (const id of served.filter((id) => id.startsWith('finish-'))) expect(rowsOf(id)[0]).toMatchObject({ status: 'success', status_code: 200 });

      const hold = (row: { prompt_tokens: number }) => (row.prompt_tokens * TEST_PRICING.input_cost_per_million + MAX_TOKENS * TEST_PRICING.output_cost_per_million) / 1e6;
      for (let i = 0; i < 6; i++) {
        // A plain call the provider was still answering: charged at its hold (the prompt estimate and max_tokens).
        const [cut] = rowsOf(`plain-${i}`);
        expect(cut).toMatchObject({ status: 'interrupted', completion_tokens: MAX_TOKENS, reason: backend.name === 'sqlite' ? 'gateway_restarted' : 'instance_reaped' });
        expect(cut.cost).toBeCloseTo(hold(cut), 12);
        // A stream: charged what it had delivered (characters / 4, as for any stream without usage), below its hold.
        const [streamed] = rowsOf(`stream-${i}`);
        const delivered = Math.ceil(PIECES.slice(0, SENT_BEFORE_STALL).join('').length / 4);
        expect(streamed).toMatchObject({ status: 'interrupted', completion_tokens: delivered });
        expect(streamed.cost).toBeCloseTo((streamed.prompt_tokens * TEST_PRICING.input_cost_per_million + delivered * TEST_PRICING.output_cost_per_million) / 1e6, 12);
        expect(streamed.cost).toBeLessThan(hold(streamed));
      }

      const total = rows.reduce((sum: number, row: { cost: number }) => sum + row.cost, 0);
      for (const budget of [ownerBudget, keyBudget]) {
        const after = await manage(second.url, 'GET', `/v1/budgets/${budget.budget_id}`);
        expect(after.reserved).toBe(0);
        expect(after.spend).toBeCloseTo(total, 9);
      }
      const summary = await manage(second.url, 'GET', `/v1/usage/summary?key_id=${key.id}`);
      expect(summary.totals).toMatchObject({ requests: 17, errors: 12, refused: 0 });

      // The restarted gateway bills as before: a new call is added once to both budgets.
      const next = new OpenAI({ apiKey: key.key, baseURL: `${second.url}/v1`, maxRetries: 0 });
      await next.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'call finish-after' }], max_tokens: MAX_TOKENS });
      const { data: after } = await manage(second.url, 'GET', '/v1/usage?limit=1000');
      const newTotal = after.reduce((sum: number, row: { cost: number }) => sum + row.cost, 0);
      for (const budget of [ownerBudget, keyBudget]) {
        const now = await manage(second.url, 'GET', `/v1/budgets/${budget.budget_id}`);
        expect(now.reserved).toBe(0);
        expect(now.spend).toBeCloseTo(newTotal, 9);
      }
    } finally {
      await second.kill();
    }
  });
});
