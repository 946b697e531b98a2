import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BodyBudget } from '../../src/serve/http/body-budget.ts';
import { resolveHeldTexts } from '../../src/encoder/large-texts.ts';
import { readJsonBody } from '../../src/serve/http/json-body.ts';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { TokenizerWorkers } from '../../src/encoder/tokenizer-workers.ts';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { generateTinyModel } from '../helpers/generated-models.ts';

/** A request stream that delivers `bytes` in chunks of `size` bytes (cutting UTF-8 characters anywhere). */
function streamOf(bytes: Buffer, size: number): PassThrough {
  const stream = new PassThrough();
  for (let i = 0; i < bytes.length; i += size) stream.write(bytes.subarray(i, i + size));
  stream.end();
  return stream;
}

/** JSON.parse's own message for `bytes`, which must not parse. */
function parseErrorOf(bytes: Buffer): string {
  try {
    JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('the body parses');
}

describe('readJsonBody', () => {
  it('parses a large body whose multi-byte characters are split across chunks', async () => {
    const text = 'é😀日本 '.repeat(200_000);
    const bytes = Buffer.from(JSON.stringify({ inputs: [text] }));
    expect(bytes.length).toBeGreaterThan(2 ** 20);
    expect(await readJsonBody(streamOf(bytes, 65_537), String(bytes.length), 8 * 2 ** 20)).toEqual({ inputs: [text] });
  });

  it('turns invalid UTF-8 into U+FFFD, as Buffer.toString does', async () => {
    const bytes = Buffer.concat([Buffer.from('{"a":"x'), Buffer.from([0xff, 0xc3]), Buffer.from('"}')]);
    expect(await readJsonBody(streamOf(bytes, 8), undefined, 1024)).toEqual(JSON.parse(bytes.toString('utf8')));
  });

  it("rejects a body that is not JSON with JSON.parse's own error", async () => {
    const bytes = Buffer.from(`{"inputs": ["${'x'.repeat(2 ** 21)}",]}`);
    await expect(readJsonBody(streamOf(bytes, 65_536), String(bytes.length), 8 * 2 ** 20)).rejects.toThrow(parseErrorOf(bytes));
  });

  it("refuses a body over the limit, by its Content-Length or by what arrives, with fastify's 413 error", async () => {
    const bytes = Buffer.from(JSON.stringify({ inputs: ['x'.repeat(5000)] }));
    await expect(readJsonBody(streamOf(bytes, 1000), String(bytes.length), 4096)).rejects.toMatchObject({ code: 'FST_ERR_CTP_BODY_TOO_LARGE', statusCode: 413 });
    await expect(readJsonBody(streamOf(bytes, 1000), undefined, 4096)).rejects.toMatchObject({ code: 'FST_ERR_CTP_BODY_TOO_LARGE', statusCode: 413 });
  });

  it("refuses a body shorter than its Content-Length with fastify's 400 error", async () => {
    const bytes = Buffer.from('{"inputs": ["hello"]}');
    await expect(readJsonBody(streamOf(bytes, 4), String(bytes.length + 3), 4096)).rejects.toMatchObject({ code: 'FST_ERR_CTP_INVALID_CONTENT_LENGTH', statusCode: 400 });
  });

  it('passes a stream error on as a 400', async () => {
    const stream = new PassThrough();
    const reading = readJsonBody(stream, undefined, 4096);
    stream.destroy(new Error('connection reset'));
    await expect(reading).rejects.toMatchObject({ message: 'connection reset', statusCode: 400 });
  });

  it('parses a body that arrives a byte at a time, multi-byte characters split across chunks', async () => {
    const value = { inputs: ['Zoë naïve café 😀 日本'.repeat(300)], normalize: true };
    const bytes = Buffer.from(JSON.stringify(value));
    expect(await readJsonBody(streamOf(bytes, 1), String(bytes.length), 1 << 20)).toEqual(value);
    // and in pieces around the size up to which chunks are gathered
    expect(await readJsonBody(streamOf(bytes, 16 * 1024 - 1), String(bytes.length), 1 << 20)).toEqual(value);
  });
});

describe('readJsonBody with a budget of bytes held', () => {
  it('counts the bytes while the body arrives and gives them back once it is parsed', async () => {
    const budget = new BodyBudget(4096);
    const stream = new PassThrough();
    const reading = readJsonBody(stream, undefined, 4096, budget);
    stream.write('{"inputs": ["');
    await new Promise((resolve) => setImmediate(resolve));
    expect(budget.heldBytes).toBe(13);
    stream.end('a"]}');
    expect(await reading).toEqual({ inputs: ['a'] });
    expect(budget.heldBytes).toBe(0);
  });

  it('refuses with a 503 the body that would take the total over the limit, leaving the others be', async () => {
    const budget = new BodyBudget(1000);
    const first = new PassThrough();
    const firstReading = readJsonBody(first, undefined, 1000, budget);
    first.write(`{"a": "${'x'.repeat(700)}`);
    await new Promise((resolve) => setImmediate(resolve));
    const second = readJsonBody(streamOf(Buffer.from(`{"b": "${'y'.repeat(400)}"}`), 100), undefined, 1000, budget);
    await expect(second).rejects.toMatchObject({ statusCode: 503, message: expect.stringContaining("already hold the server's limit of 1000 bytes (--body-buffer-limit)") });
    expect(budget.heldBytes).toBe(707);
    first.end('"}');
    expect(await firstReading).toEqual({ a: 'x'.repeat(700) });
    expect(budget.heldBytes).toBe(0);
  });

  it('gives the bytes back when the body fails: too large, not JSON, cut off', async () => {
    const budget = new BodyBudget(1 << 20);
    await expect(readJsonBody(streamOf(Buffer.from('x'.repeat(5000)), 1000), undefined, 4096, budget)).rejects.toMatchObject({ statusCode: 413 });
    expect(budget.heldBytes).toBe(0);
    await expect(readJsonBody(streamOf(Buffer.from('{"a": '), 2), undefined, 4096, budget)).rejects.toBeInstanceOf(SyntaxError);
    expect(budget.heldBytes).toBe(0);
    const cut = new PassThrough();
    const reading = readJsonBody(cut, undefined, 4096, budget);
    cut.write('{"a": "xxxx');
    await new Promise((resolve) => setImmediate(resolve));
    expect(budget.heldBytes).toBe(11);
    cut.destroy();
    await expect(reading).rejects.toMatchObject({ statusCode: 400, message: 'the request body ended before it was complete' });
    expect(budget.heldBytes).toBe(0);
  });

  it('hands a large body announced by its Content-Length to the off-thread parser as its bytes, and only such a body', async () => {
    const text = 'é😀日本 '.repeat(200_000);
    const bytes = Buffer.from(JSON.stringify({ inputs: [text] }));
    const handed: number[] = [];
    const parseLarge = async (body: Uint8Array) => {
      handed.push(body.byteLength);
      return JSON.parse(Buffer.from(body).toString('utf8')) as unknown;
    };
    expect(await readJsonBody(streamOf(bytes, 65_537), String(bytes.length), 8 * 2 ** 20, undefined, parseLarge)).toEqual({ inputs: [text] });
    expect(handed).toEqual([bytes.length]);
    // small, or of unknown length (chunked): parsed here
    expect(await readJsonBody(streamOf(Buffer.from('{"a":1}'), 3), '7', 1024, undefined, parseLarge)).toEqual({ a: 1 });
    expect(await readJsonBody(streamOf(bytes, 65_537), undefined, 8 * 2 ** 20, undefined, parseLarge)).toEqual({ inputs: [text] });
    expect(handed).toHaveLength(1);
  });

  it('parses on the tokenizer thread as here: values, invalid UTF-8, and JSON.parse\'s SyntaxError', async () => {
    const dir = await generateTinyModel({ modelType: 'embedding' });
    const threads = new TokenizerWorkers(sourceInferenceWorker(), { tokenizerJson: readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'), tokenizerConfig: null });
    try {
      const bytes = Buffer.concat([Buffer.from('{"inputs":["'), Buffer.from('日本'.repeat(400_000)), Buffer.from([0xff]), Buffer.from('"],"n":null}')]);
      const parseLarge = (body: Uint8Array) => threads.parseJson(body);
      const parsed = (await readJsonBody(streamOf(bytes, 65_536), String(bytes.length), 8 * 2 ** 20, undefined, parseLarge)) as { inputs: string[] };
      // the long text arrives held apart (a stand-in on this thread), and reads back as JSON.parse makes it
      expect(parsed.inputs[0].length).toBeLessThan(200);
      expect(resolveHeldTexts(parsed)).toEqual(JSON.parse(bytes.toString('utf8')));
      const broken = Buffer.from(`{"inputs": ["${'x'.repeat(2 ** 21)}",]}`);
      const refused = readJsonBody(streamOf(broken, 65_536), String(broken.length), 8 * 2 ** 20, undefined, parseLarge);
      await expect(refused).rejects.toThrow(SyntaxError);
      await expect(refused).rejects.toThrow(parseErrorOf(broken));
    } finally {
      await threads.close();
    }
  });
});
