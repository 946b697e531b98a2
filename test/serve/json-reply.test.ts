/**
 * sendJson: a response of one piece goes out as one string with its Content-Length; a larger one in pieces, chunked,
 * with turns of the event loop between them (a connection on loopback takes every write at once, so backpressure
 * alone would write the whole response in one turn).
 */
import { Readable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonBody, sendJson } from '../../src/serve/http/json-reply.ts';
import { jsonPieces, stringifyJson } from '../../src/shared/float32-json.ts';

const vector = Float32Array.from({ length: 384 }, (_, i) => Math.sin(i) / 3);
const large = { results: Array.from({ length: 4000 }, (_, index) => ({ index, embedding: vector })), model_id: 'm' };
const small = { results: [{ index: 0, embedding: vector.subarray(0, 4) }], model_id: 'm' };

let app: FastifyInstance;
let url: string;

beforeAll(async () => {
  app = Fastify();
  app.get('/large', (_request, reply) => sendJson(reply, large));
  app.get('/small', (_request, reply) => sendJson(reply, small));
  app.get('/failing', (_request, reply) => sendJson(reply, { results: [...large.results, { cannot: 1n }] }));
  url = await app.listen({ host: '127.0.0.1', port: 0 });
});

afterAll(() => app.close());

describe('sendJson', () => {
  it('sends a response of a few pieces whole, as one string with its Content-Length', async () => {
    const medium = { results: large.results.slice(0, 400) };
    expect([...jsonPieces(medium, 512 * 1024)].length).toBeGreaterThan(1);
    expect(jsonBody(medium)).toBe(stringifyJson(medium));
  });

  it('sends a small response as one string with its Content-Length', async () => {
    const response = await fetch(`${url}/small`);
    const text = await response.text();
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(response.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
    expect(text).toBe(stringifyJson(small));
  });

  it('sends a large response in pieces, chunked', async () => {
    expect([...jsonPieces(large, 512 * 1024)].length).toBeGreaterThan(4);
    const response = await fetch(`${url}/large`);
    const text = await response.text();
    expect(response.headers.get('content-length')).toBeNull();
    expect(response.headers.get('transfer-encoding')).toBe('chunked');
    expect(text).toBe(stringifyJson(large));
  });

  it('takes each piece after the first few on its own turn of the event loop', async () => {
    const body = jsonBody(large);
    expect(body).toBeInstanceOf(Readable);
    let turn = 0;
    let done = false;
    const count = () => {
      turn++;
      if (!done) setImmediate(count);
    };
    setImmediate(count);
    // a reader that takes every piece at once, as a connection on loopback does
    const turns: number[] = [];
    const chunks: Buffer[] = [];
    for await (const piece of body as Readable) {
      turns.push(turn);
      chunks.push(piece as Buffer);
    }
    done = true;
    expect(Buffer.concat(chunks).toString()).toBe(stringifyJson(large));
    expect(turns.length).toBeGreaterThan(4);
    for (let i = 1; i < turns.length; i++) expect(turns[i], `turns at each piece: ${turns.join(' ')}`).toBeGreaterThan(turns[i - 1]);
  });

  it('cuts the connection when the walk fails after the status was sent, rather than end a broken body', async () => {
    const response = await fetch(`${url}/failing`);
    expect(response.status).toBe(200);
    await expect(response.text()).rejects.toThrow();
  });
});
