import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { sourceSqliteReader } from '../../src/cli/installed-files.ts';
import { SqliteDriver } from '../../src/gateway/storage/sqlite-driver.ts';
import { GatewayStore } from '../../src/gateway/storage/store.ts';
import { countTurns } from '../helpers/event-loop-turns.ts';
import { CHAT_COST, MASTER_KEY, startTestGateway, TEST_PRICING, useFakeProvider } from './helpers/gateway.ts';

// The SQLite reader thread (src/gateway/storage/sqlite-reader-thread.ts): usage analytics off the event loop.

const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-sqlite-reader-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const newFile = () => path.join(dir, `reader-${++files}.db`);

/** Runs `work` and counts the event loop's turns meanwhile. */
async function turnsDuring<T>(work: () => Promise<T>): Promise<{ result: T; turns: number }> {
  const counter = countTurns();
  try {
    const result = await work();
    return { result, turns: counter.turns };
  } finally {
    counter.stop();
  }
}

it('scans on the reader thread: the event loop turns meanwhile, and it sees what the writer committed just before', async () => {
  const driver = new SqliteDriver(newFile(), { reader: sourceSqliteReader() });
  const inline = new SqliteDriver(newFile());
  try {
    for (const d of [driver, inline]) {
      await d.run('CREATE TABLE numbers (n INTEGER)');
      await d.transaction(Array.from({ length: 2_000 }, (_, n) => ({ sql: 'INSERT INTO numbers (n) VALUES (?)', params: [n] })));
    }
    const sum = 'SELECT COUNT(*) AS count, SUM(n) AS total FROM numbers a WHERE n >= ?';
    const threaded = await turnsDuring(() => driver.scan(sum, [0]));
    expect(threaded.result).toEqual([{ count: 2_000, total: (1_999 * 2_000) / 2 }]);
    expect(threaded.turns).toBeGreaterThan(0);
    // Without a reader the same scan runs inline: no turn of the event loop while it does.
    const inlined = await turnsDuring(() => inline.scan(sum, [0]));
    expect(inlined.result).toEqual(threaded.result);
    expect(inlined.turns).toBe(0);

    await driver.run('INSERT INTO numbers (n) VALUES (?)', [10_000]);
    expect(await driver.scan('SELECT MAX(n) AS top FROM numbers')).toEqual([{ top: 10_000 }]);
    // Scans in flight together each get their own answer.
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => driver.scan('SELECT COUNT(*) AS count FROM numbers WHERE n < ?', [i * 100])));
    expect(many).toEqual(Array.from({ length: 20 }, (_, i) => [{ count: i * 100 }]));
  } finally {
    await driver.close();
    await inline.close();
  }
});

it('a query the reader refuses rejects with SQLite\'s message and code; the reader cannot write; closed, it answers no more', async () => {
  const driver = new SqliteDriver(newFile(), { reader: sourceSqliteReader() });
  try {
    await driver.run('CREATE TABLE t (n INTEGER)');
    await expect(driver.scan('SELECT nope FROM t')).rejects.toMatchObject({ message: expect.stringContaining('no such column: nope'), code: 'ERR_SQLITE_ERROR' });
    await expect(driver.scan('INSERT INTO t (n) VALUES (1) RETURNING n')).rejects.toMatchObject({ message: expect.stringContaining('readonly') });
    expect(await driver.all('SELECT COUNT(*) AS n FROM t')).toEqual([{ n: 0 }]);
    // Answers still come after a refusal.
    expect(await driver.scan('SELECT COUNT(*) AS n FROM t')).toEqual([{ n: 0 }]);
  } finally {
    await driver.close();
  }
  await expect(driver.scan('SELECT 1')).rejects.toThrow('closed');
});

it('an in-memory database has no reader (a second connection could not see it): scans run inline', async () => {
  const driver = new SqliteDriver(':memory:', { reader: sourceSqliteReader() });
  try {
    await driver.run('CREATE TABLE t (n INTEGER)');
    await driver.run('INSERT INTO t (n) VALUES (7)');
    expect(await driver.scan('SELECT n FROM t')).toEqual([{ n: 7 }]);
  } finally {
    await driver.close();
  }
});

it('a reader that cannot start fails the scans that need it, with the reason, and the rest of the store keeps working', async () => {
  const driver = new SqliteDriver(newFile(), { reader: { script: new URL('./no-such-reader.ts', import.meta.url) } });
  const store = new GatewayStore(driver);
  try {
    await store.migrate();
    await expect(store.usage.summarize({})).rejects.toThrow(/no-such-reader|Cannot find module|exited/);
    expect(await store.budgets.list()).toEqual([]);
  } finally {
    await store.close();
  }
});

const provider = await useFakeProvider();

it('a gateway with the reader answers usage and its analytics from the rows its calls wrote', async () => {
  const gateway = await startTestGateway(
    `sqlite:${newFile()}`,
    { providers: { openai: { api_key: 'sk-test', api_base: provider.baseURL } }, pricing: { 'openai:gpt-fake': TEST_PRICING } },
    { sqliteReader: sourceSqliteReader() },
  );
  try {
    const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'reader' } })).json;
    for (let i = 0; i < 3; i++) {
      const reply = await gateway.call('POST', '/v1/chat/completions', { key: key.key, body: { model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'hi' }] } });
      expect(reply.status).toBe(200);
    }
    const usage = await gateway.call('GET', `/v1/keys/${key.id}/usage`);
    expect(usage.json.totals.requests).toBe(3);
    const summary = await gateway.call('GET', '/v1/usage/summary');
    expect(summary.json.totals).toMatchObject({ requests: 3, errors: 0, cost: Number((3 * CHAT_COST).toFixed(9)) });
    expect(summary.json.by_key).toEqual([expect.objectContaining({ key_id: key.id, requests: 3 })]);
    const csv = await fetch(`${gateway.url}/v1/usage.csv`, { headers: { 'x-hub-key': `Bearer ${MASTER_KEY}` } });
    expect((await csv.text()).trim().split('\r\n')).toHaveLength(4);
  } finally {
    await gateway.close();
  }
});
