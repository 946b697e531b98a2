/**
 * Large texts are held apart from the event loop's heap (src/encoder/large-texts.ts): a large body parsed on the
 * tokenizer thread and a large gRPC message carry stand-ins on the main thread, while the tokenizer reads the texts
 * themselves. What a client sees must not change: the same vectors as a server that never holds a text (no tokenizer
 * thread, every text on the event loop), the texts themselves where an answer quotes them, and no stand-in, ever, in
 * an answer or in what the model is given.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { adoptHeldTexts, heldText, holdLargeStrings, LARGE_TEXT_UNITS, newStandIn, resolveHeldTexts, resolveHeldTextsInJson, sharedUtf8, textOf, unitsOfText } from '../../src/encoder/large-texts.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';
import { grpcClient } from '../helpers/served-model.ts';

describe('held texts', () => {
  it('a parsed value holds its long strings as shared UTF-8 and carries stand-ins that read back exactly', () => {
    const long = 'é中😀a'.repeat(LARGE_TEXT_UNITS / 2);
    const value = { input: [long, 'short'], nested: { deep: [long.slice(1)] }, n: 1 };
    const held = holdLargeStrings(value);
    expect(held).toHaveLength(2);
    expect(value.input[1]).toBe('short');
    expect(value.input[0].length).toBeLessThan(200);
    expect(held[0].bytes.buffer).toBeInstanceOf(SharedArrayBuffer);
    // before adoption nothing resolves: a stand-in is only as good as the object that keeps it
    expect(textOf(value.input[0])).toBe(value.input[0]);
    adoptHeldTexts(value, held);
    expect(textOf(value.input[0])).toBe(long);
    expect(textOf(value.nested.deep[0])).toBe(long.slice(1));
    expect(unitsOfText(value.input[0])).toBe(long.length);
    expect(resolveHeldTexts(value)).toEqual({ input: [long, 'short'], nested: { deep: [long.slice(1)] }, n: 1 });
    const json = JSON.stringify({ quoted: `"${value.input[0]}" and ${value.nested.deep[0]}` });
    expect(JSON.parse(resolveHeldTextsInJson(json))).toEqual({ quoted: `"${long}" and ${long.slice(1)}` });
  });

  it('a stand-in that was never held, or that a client made up, stays the string it is', () => {
    const madeUp = newStandIn(5);
    expect(heldText(madeUp)).toBeUndefined();
    expect(textOf(madeUp)).toBe(madeUp);
    expect(resolveHeldTextsInJson(JSON.stringify([madeUp]))).toBe(JSON.stringify([madeUp]));
    expect(new TextDecoder().decode(sharedUtf8('ok ✓').slice())).toBe('ok ✓');
  });
});

/** One text per shape, each long enough to be held (and, truncated, to fill the model's length). */
const LONG_TEXTS = {
  words: 'the quick brown fox jumps over the lazy dog '.repeat(6000),
  cjk: '中文字的句子，'.repeat(20_000),
  emoji: '😀👍🏽 '.repeat(30_000),
};

describe('serve with a tokenizer thread answers large texts as a server without one', () => {
  let threaded: InProcessEncoder;
  let plain: InProcessEncoder;
  let reranker: InProcessEncoder;

  beforeAll(async () => {
    const dir = await generateTinyModel({ modelType: 'embedding' });
    const http = { bodyLimitBytes: 8 * 2 ** 20 };
    threaded = await serveInProcess(dir, 'tiny', 'embedding', { grpc: true, http, pipeline: { workers: 1, inferenceWorker: sourceInferenceWorker() } });
    plain = await serveInProcess(dir, 'tiny', 'embedding', { grpc: true, http, pipeline: { workers: 0 } });
    const rerankDir = await generateTinyModel({ modelType: 'sequence_classification', labels: ['score'] });
    reranker = await serveInProcess(rerankDir, 'ranker', 'sequence_classification', { http, pipeline: { workers: 1, inferenceWorker: sourceInferenceWorker() } });
  }, 120_000);

  afterAll(async () => {
    await Promise.all([threaded?.close(), plain?.close(), reranker?.close()]);
  });

  const post = async (server: InProcessEncoder, path: string, body: unknown) => {
    const response = await fetch(`${server.httpUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await response.text();
    expect(response.status, text.slice(0, 300)).toBe(200);
    expect(text).not.toContain('\uFDD0');
    return JSON.parse(text) as Record<string, unknown>;
  };

  it('OpenAI embeddings and /predict: the same numbers, usage and token strings', { timeout: 60_000 }, async () => {
    const inputs = [...Object.values(LONG_TEXTS), 'a short one'];
    // over 1 MiB: parsed on the tokenizer thread, its long strings held
    expect(Buffer.byteLength(JSON.stringify({ input: inputs }))).toBeGreaterThan(2 ** 20);
    const [held, direct] = await Promise.all([post(threaded, '/v1/embeddings', { input: inputs }), post(plain, '/v1/embeddings', { input: inputs })]);
    expect(held).toEqual(direct);
    const [heldTokens, directTokens] = await Promise.all([post(threaded, '/predict', { inputs, normalize: true }), post(plain, '/predict', { inputs, normalize: true })]);
    expect(heldTokens).toEqual(directTokens);
    const tokens = (heldTokens.results as { embeddings: { token_info: { token: string } }[] }[])[0].embeddings.map((row) => row.token_info.token);
    expect(tokens.slice(0, 3)).toEqual(['the', 'quick', 'brown']);
    // and the texts were held: the threaded server's parsed body carries stand-ins, the plain one's the texts
    const body = () => Buffer.from(JSON.stringify({ input: inputs }));
    const parsed = (await threaded.pipeline.parseJson(body())) as { input: string[] };
    expect(parsed.input.slice(0, 3).every((text, index) => text.length < 200 && textOf(text) === inputs[index])).toBe(true);
    expect(parsed.input[3]).toBe('a short one');
    expect(((await plain.pipeline.parseJson(body())) as { input: string[] }).input).toEqual(inputs);
  });

  it('answers that quote a text quote the text: Cohere texts, /predict metadata, a model name in an error', { timeout: 60_000 }, async () => {
    const long = LONG_TEXTS.cjk;
    const cohere = await post(threaded, '/v1/embed', { texts: [long, 'x'.repeat(2 ** 20)] });
    expect(cohere.texts).toEqual([long, 'x'.repeat(2 ** 20)]);
    const predicted = await post(threaded, '/predict', { inputs: ['x'.repeat(2 ** 20)], normalize: true, metadata: { note: long } });
    expect(predicted.metadata).toEqual({ note: long });
    const refused = await fetch(`${threaded.httpUrl}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: 'hi', encoding_format: long, pad: 'x'.repeat(2 ** 20) }) });
    const message = await refused.text();
    expect(refused.status).toBe(400);
    expect(message).not.toContain('\uFDD0');
  });

  it('rerank: a long query paired with each document, return_documents quoting a long document', { timeout: 60_000 }, async () => {
    const documents = [LONG_TEXTS.words, 'short document', LONG_TEXTS.emoji, 'x'.repeat(2 ** 20)];
    const body = { query: LONG_TEXTS.cjk.slice(0, 70_000), documents, return_documents: true };
    const answer = await post(reranker, '/v1/rerank', body);
    const results = answer.results as { index: number; relevance_score: number; document: { text: string } }[];
    expect(results.map((result) => result.document.text).sort()).toEqual([...documents].sort());
    // the same scores as the texts sent in a body too small to be held
    for (const result of results) {
      const alone = await post(reranker, '/v1/rerank', { query: body.query.slice(0, 60_000), documents: [documents[result.index].slice(0, 60_000)] });
      const score = (alone.results as { relevance_score: number }[])[0].relevance_score;
      expect(result.relevance_score).toBeCloseTo(score, 5);
    }
  });

  it('gRPC: a message with large texts gives what a server without a tokenizer thread gives', { timeout: 60_000 }, async () => {
    const inputs = Object.values(LONG_TEXTS);
    const [held, direct] = [grpcClient(threaded.grpcAddress!, 'embedding'), grpcClient(plain.grpcAddress!, 'embedding')];
    try {
      const [fromHeld, fromDirect] = await Promise.all([held.predict({ inputs, metadata: { note: LONG_TEXTS.words } }), direct.predict({ inputs, metadata: { note: LONG_TEXTS.words } })]);
      expect(fromHeld).toEqual(fromDirect);
      expect((fromHeld as { metadata: Record<string, string> }).metadata.note).toBe(LONG_TEXTS.words);
    } finally {
      held.close();
      direct.close();
    }
  });
});
