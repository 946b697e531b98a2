/**
 * Slow and stalled clients (src/serve/http/network-limits.ts, body-budget.ts): a request that does not arrive within
 * the request timeout is answered 408 and its connection closed, whatever part of it is missing; the time spent
 * answering is not counted; the bytes of bodies still arriving are bounded server-wide (503 beyond). In-process,
 * with short limits, over real sockets on 127.0.0.1.
 */
import net from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Predictor } from '../../src/encoder/predictor.ts';
import { createHttpApp } from '../../src/serve/http/app.ts';
import { BodyBudget } from '../../src/serve/http/body-budget.ts';
import { serverInfo } from '../../src/serve/server-info.ts';
import { stubServingLimits } from '../helpers/predict-responses.ts';

const REQUEST_TIMEOUT_MS = 600;
const BODY_LIMIT = 48 * 1024;
const BUDGET = 64 * 1024;

/** Answers /predict after `answerDelayMs` (longer than the request timeout, for one test), echoing the input count. */
let answerDelayMs = 0;
const predictor: Predictor = {
  modelId: 'm',
  modelType: 'embedding',
  metadata: () => ({ model_id: 'm', model_type: 'embedding' }),
  predict: async (body) => {
    await new Promise((resolve) => setTimeout(resolve, answerDelayMs));
    return { results: [], model_id: `m:${(body as { inputs: unknown[] }).inputs.length}` };
  },
  embed: () => Promise.resolve({ model_id: 'm', vectors: [new Float32Array([1, 0])], promptTokens: 1 }),
  rerank: () => Promise.reject(new Error('unused')),
  tokenize: () => Promise.reject(new Error('unused')),
  decode: () => Promise.reject(new Error('unused')),
  servingLimits: stubServingLimits,
};

let app: FastifyInstance;
let port: number;
const budget = new BodyBudget(BUDGET);

beforeAll(async () => {
  app = await createHttpApp(predictor, { bodyLimitBytes: BODY_LIMIT, requestTimeoutMs: REQUEST_TIMEOUT_MS, bodyBudget: budget, serverInfo: serverInfo({ target: 't' }) });
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as net.AddressInfo).port;
});
afterAll(() => app?.close());

interface RawExchange {
  socket: net.Socket;
  /** Everything the server sent, and how long after connecting it closed the connection. */
  closed: Promise<{ text: string; afterMs: number }>;
}

/** A raw connection that sends `head` at once; the caller sends the rest (or not). */
function connect(head: string): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    const closed = new Promise<{ text: string; afterMs: number }>((done) => socket.on('close', () => done({ text, afterMs: Date.now() - started })));
    socket.once('error', () => {}); // a reset after the 408 is what closing looks like to some clients
    socket.once('connect', () => {
      socket.write(head);
      resolve({ socket, closed });
    });
    socket.once('error', reject);
  });
}

function postHead(path: string, contentLength: number): string {
  return `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${contentLength}\r\n\r\n`;
}

async function until(condition: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const TIMEOUT_408 =
  /^HTTP\/1\.1 408 Request Timeout\r\nContent-Type: text\/plain; charset=utf-8\r\n.*\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\n\r\nRequest Timeout: the request was not received in time$/s;

describe('the request timeout', () => {
  it('answers 408 and closes a body that stalls', async () => {
    const exchange = await connect(`${postHead('/predict', 1000)}{"inputs": [`);
    const { text, afterMs } = await exchange.closed;
    expect(text).toMatch(TIMEOUT_408);
    expect(afterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    expect(afterMs).toBeLessThan(REQUEST_TIMEOUT_MS + 1000);
  });

  it('answers 408 and closes a request stalled in its headers', async () => {
    const exchange = await connect('POST /predict HTTP/1.1\r\nHost: localhost\r\n');
    const { text, afterMs } = await exchange.closed;
    expect(text).toMatch(TIMEOUT_408);
    expect(afterMs).toBeLessThan(REQUEST_TIMEOUT_MS + 1000);
  });

  it('counts the whole request, not silences: a body trickling in a byte every 50 ms is cut all the same', async () => {
    const exchange = await connect(`${postHead('/predict', 1000)}{`);
    const trickle = setInterval(() => exchange.socket.writable && exchange.socket.write(' '), 50);
    try {
      const { text, afterMs } = await exchange.closed;
      expect(text).toMatch(TIMEOUT_408);
      expect(afterMs).toBeLessThan(REQUEST_TIMEOUT_MS + 1000);
    } finally {
      clearInterval(trickle);
    }
  });

  it('does not count the time spent answering: a request that arrived in time is answered after longer than the timeout', async () => {
    answerDelayMs = REQUEST_TIMEOUT_MS * 2;
    try {
      const started = Date.now();
      const response = await fetch(`http://127.0.0.1:${port}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"inputs": ["a", "b"]}' });
      expect(response.status).toBe(200);
      expect(((await response.json()) as { model_id: string }).model_id).toBe('m:2');
      expect(Date.now() - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS * 2 - 50);
    } finally {
      answerDelayMs = 0;
    }
  });
});

describe('the bytes of bodies still arriving', () => {
  it('are bounded server-wide: a body that would pass the limit gets 503 at once, in its dialect; they are given back when bodies end', async () => {
    // one slow client holds 40 KiB of its 48 KiB body
    const first = await connect(`${postHead('/predict', BODY_LIMIT)}{"inputs": ["${'x'.repeat(40 * 1024 - 13)}`);
    await until(() => budget.heldBytes >= 40 * 1024, 'the first body to be held');
    // a second one would take the total over 64 KiB
    const second = await connect(`${postHead('/predict', BODY_LIMIT)}{"inputs": ["${'y'.repeat(30 * 1024)}`);
    const refused = await second.closed;
    expect(refused.afterMs).toBeLessThan(REQUEST_TIMEOUT_MS);
    expect(refused.text).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(refused.text).toContain(`Service Unavailable: the request bodies being received already hold the server's limit of ${BUDGET} bytes (--body-buffer-limit); retry shortly`);
    // the OpenAI dialect under /v1
    const third = await connect(`${postHead('/v1/embeddings', BODY_LIMIT)}{"input": "${'z'.repeat(30 * 1024)}`);
    const openAi = await third.closed;
    expect(openAi.text).toMatch(/^HTTP\/1\.1 503 /);
    expect(JSON.parse(openAi.text.slice(openAi.text.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { type: 'server_error', message: expect.stringContaining('--body-buffer-limit') } });
    // a small body still fits
    const small = await fetch(`http://127.0.0.1:${port}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"inputs": ["a"]}' });
    expect(small.status).toBe(200);
    // the slow one is cut by the timeout, and what it held is given back
    expect((await first.closed).text).toMatch(TIMEOUT_408);
    await until(() => budget.heldBytes === 0, 'the budget to be given back');
    const large = JSON.stringify({ inputs: ['w'.repeat(BODY_LIMIT - 100)] });
    const answered = await fetch(`http://127.0.0.1:${port}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: large });
    expect(answered.status).toBe(200);
    expect(budget.heldBytes).toBe(0);
  });

  it('are given back when a client hangs up in the middle of its body', async () => {
    const exchange = await connect(`${postHead('/predict', BODY_LIMIT)}{"inputs": ["${'x'.repeat(20 * 1024)}`);
    await until(() => budget.heldBytes >= 20 * 1024, 'the body to be held');
    exchange.socket.destroy();
    await until(() => budget.heldBytes === 0, 'the budget to be given back');
  });
});
