// Rerank through the public arerank and the Hub class (the synchronous forms: sync.test.ts): Cohere through the real cohere-ai SDK and Voyage through
// its HTTP API, each against its loopback vendor fake. The options go out under each vendor's own fields, the answer
// comes back in one shape (most relevant first, at most top_n, texts when asked), bad requests and providers without
// rerank are refused before anything is sent, vendor failures become the unified exceptions. The encoder provider's
// rerank is tested against a real cross-encoder server in encoder.test.ts.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  arerank,
  AuthenticationError,
  Hub,
  InvalidRequestError,
  ProviderError,
  RateLimitError,
  UnsupportedParameterError,
  type RerankRequest,
} from '../../../src/hub/index.ts';
import { cohereError, startCohereFake } from '../../fakes/cohere.ts';
import { bodyOf, fakeRanking, type VendorServer } from '../../fakes/vendor-server.ts';
import { startVoyageFake, voyageError } from '../../fakes/voyage.ts';
import { eventually, failureOf } from '../helpers.ts';

const QUERY = 'capital of france';
const DOCUMENTS = ['the cat sat on the mat', 'paris is the capital of france', 'france borders spain', 'berlin is a capital'];

let cohere: VendorServer;
let voyage: VendorServer;

beforeAll(async () => {
  [cohere, voyage] = await Promise.all([startCohereFake(), startVoyageFake()]);
});
afterAll(() => Promise.all([cohere.close(), voyage.close()]));
beforeEach(() => {
  cohere.reset();
  voyage.reset();
});

const viaCohere = (request: Partial<RerankRequest> = {}): RerankRequest => ({
  provider: 'cohere',
  api_key: 'co-key',
  api_base: cohere.url,
  model: 'rerank-v3.5',
  query: QUERY,
  documents: DOCUMENTS,
  unified_exceptions: true,
  max_retries: 0,
  ...request,
});

const viaVoyage = (request: Partial<RerankRequest> = {}): RerankRequest => ({
  provider: 'voyage',
  api_key: 'vo-key',
  api_base: `${voyage.url}/v1`,
  model: 'rerank-2.5',
  query: QUERY,
  documents: DOCUMENTS,
  unified_exceptions: true,
  max_retries: 0,
  ...request,
});

describe('cohere rerank (cohere-ai SDK against the fake)', () => {
  it("POST /v2/rerank with Cohere's wire fields; every document ranked, most relevant first; search units billed", async () => {
    const response = await arerank(viaCohere());
    expect(cohere.lastRequest.path).toBe('/v2/rerank');
    expect(cohere.lastRequest.headers.authorization).toBe('Bearer co-key');
    expect(bodyOf(cohere.lastRequest)).toEqual({ model: 'rerank-v3.5', query: QUERY, documents: DOCUMENTS });
    expect(response).toEqual({
      id: 'rerank-fake',
      model: 'rerank-v3.5',
      results: fakeRanking(QUERY, DOCUMENTS),
      usage: null,
      meta: { billed_units: { search_units: 1 } },
    });
    // the fake's ranking is not the input order, so the order checked above is the fake's, not an accident
    expect(response.results.map((result) => result.index)).not.toEqual([0, 1, 2, 3]);
    expect(response.results[0].index).toBe(1);
  });

  it('top_n and max_tokens_per_doc go out as top_n and max_tokens_per_doc; an extra option (priority) too', async () => {
    const response = await arerank(viaCohere({ top_n: 2, max_tokens_per_doc: 512, priority: 3 }));
    expect(bodyOf(cohere.lastRequest)).toEqual({ model: 'rerank-v3.5', query: QUERY, documents: DOCUMENTS, top_n: 2, max_tokens_per_doc: 512, priority: 3 });
    expect(response.results).toEqual(fakeRanking(QUERY, DOCUMENTS, 2));
  });

  it('return_documents adds each result its text from the request; it is not sent (Cohere v2 has no such field)', async () => {
    const response = await arerank(viaCohere({ return_documents: true, top_n: 3 }));
    expect(bodyOf(cohere.lastRequest)).not.toHaveProperty('return_documents');
    expect(response.results).toHaveLength(3);
    for (const result of response.results) expect(result.document).toEqual({ text: DOCUMENTS[result.index] });
  });

  it('an answer out of order, or longer than top_n, is sorted (ties by position) and cut', async () => {
    const results = [
      { index: 0, relevance_score: 0.1 },
      { index: 3, relevance_score: 0.7 },
      { index: 2, relevance_score: 0.9 },
      { index: 1, relevance_score: 0.7 },
    ];
    cohere.enqueue({ json: { id: 'unordered', results, meta: { billed_units: { search_units: 1 } } } });
    const response = await arerank(viaCohere({ top_n: 3 }));
    expect(response.results).toEqual([
      { index: 2, relevance_score: 0.9 },
      { index: 1, relevance_score: 0.7 },
      { index: 3, relevance_score: 0.7 },
    ]);
  });

  it('tokens, when Cohere reports them, are the usage', async () => {
    cohere.enqueue({ json: { id: 'with-tokens', results: [{ index: 0, relevance_score: 0.5 }], meta: { billed_units: { search_units: 2, input_tokens: 40 }, tokens: { input_tokens: 40 } } } });
    const response = await arerank(viaCohere({ documents: ['one'] }));
    expect(response.usage).toEqual({ prompt_tokens: 40, total_tokens: 40 });
    expect(response.meta).toEqual({ billed_units: { search_units: 2, input_tokens: 40 } });
  });

  it('a result for a document that was not sent is the provider\'s fault: ProviderError', async () => {
    cohere.enqueue({ json: { id: 'odd', results: [{ index: 4, relevance_score: 0.5 }] } });
    const failure = await failureOf(arerank(viaCohere({ documents: ['a', 'b', 'c', 'd'] })));
    expect(failure).toBeInstanceOf(ProviderError);
    expect((failure as Error).message).toMatch(/document 4 of 4/);
  });

  it.each([
    ['429 with Retry-After → RateLimitError', cohereError(429, 'too many requests', { 'retry-after': '9' }), RateLimitError],
    ['400 → InvalidRequestError', cohereError(400, 'invalid request: model not found'), InvalidRequestError],
    ['500 → ProviderError', cohereError(500, 'internal error'), ProviderError],
  ] as const)('%s', async (_name, reply, type) => {
    cohere.enqueue(reply);
    const failure = await failureOf(arerank(viaCohere()));
    expect(failure).toBeInstanceOf(type);
    expect((failure as Error).message).toContain((reply as { json: { message: string } }).json.message);
    if (failure instanceof RateLimitError) expect(failure.retry_after).toBe(9);
  });

  it('a refused key → AuthenticationError without the key', async () => {
    const failure = await failureOf(arerank(viaCohere({ api_key: 'bad-key' })));
    expect(failure).toBeInstanceOf(AuthenticationError);
    expect((failure as Error).message).not.toContain('bad-key');
  });

  it('aborting the call closes the connection to Cohere', async () => {
    const abandoned = cohere.abandonedReplies;
    cohere.enqueue({ delayMs: 30_000, then: { json: {} } });
    const controller = new AbortController();
    const pending = failureOf(arerank(viaCohere({ signal: controller.signal })));
    await eventually(() => cohere.requests.length > 0, 'the rerank request');
    controller.abort();
    await pending;
    await eventually(() => cohere.abandonedReplies > abandoned, 'the connection to close');
  });
});

describe('voyage rerank (HTTP API against the fake)', () => {
  it('POST /v1/rerank: top_n goes out as top_k, extra options (truncation) as they are; tokens are the usage', async () => {
    const response = await arerank(viaVoyage({ top_n: 2, truncation: false }));
    expect(voyage.lastRequest.path).toBe('/v1/rerank');
    expect(voyage.lastRequest.headers.authorization).toBe('Bearer vo-key');
    expect(bodyOf(voyage.lastRequest)).toEqual({ query: QUERY, documents: DOCUMENTS, model: 'rerank-2.5', top_k: 2, truncation: false });
    const tokens = [QUERY, ...DOCUMENTS].reduce((n, text) => n + text.split(/\s+/).length, 0) * DOCUMENTS.length;
    expect(response).toMatchObject({ model: 'rerank-2.5', results: fakeRanking(QUERY, DOCUMENTS, 2), usage: { prompt_tokens: tokens, total_tokens: tokens }, meta: null });
    // Voyage's answer has no id: the Hub gives one
    expect(response.id).toMatch(/^rerank-[0-9a-f-]{36}$/);
  });

  it('max_tokens_per_doc is refused (Voyage cannot cut documents to a length), before anything is sent', async () => {
    const failure = await failureOf(arerank(viaVoyage({ max_tokens_per_doc: 100 })));
    expect(failure).toBeInstanceOf(UnsupportedParameterError);
    expect(failure).toMatchObject({ parameter_name: 'max_tokens_per_doc', provider_name: 'voyage' });
    expect(voyage.requests).toHaveLength(0);
  });

  it.each([
    ['400 unknown model → InvalidRequestError', voyageError(400, 'Model rerank-0 is not supported.'), InvalidRequestError],
    ['429 → RateLimitError', voyageError(429, 'Rate limit exceeded', { 'retry-after': '3' }), RateLimitError],
  ] as const)('%s', async (_name, reply, type) => {
    voyage.enqueue(reply);
    const failure = await failureOf(arerank(viaVoyage()));
    expect(failure).toBeInstanceOf(type);
    expect((failure as Error).message).toBe(`[voyage] ${(reply as { json: { detail: string } }).json.detail}`);
  });
});

describe('checks before anything is sent', () => {
  it.each([
    ['no query', { query: undefined }, 'query'],
    ['an empty query', { query: '' }, 'query'],
    ['no documents', { documents: [] }, 'documents'],
    ['documents that are not strings', { documents: ['ok', { text: 'object' }] as never }, 'documents'],
    ['documents as one string', { documents: 'just one' as never }, 'documents'],
    ['top_n 0', { top_n: 0 }, 'top_n'],
    ['top_n 2.5', { top_n: 2.5 }, 'top_n'],
    ['top_n "3"', { top_n: '3' as never }, 'top_n'],
    ['max_tokens_per_doc -1', { max_tokens_per_doc: -1 }, 'max_tokens_per_doc'],
    ['return_documents "yes"', { return_documents: 'yes' as never }, 'return_documents'],
  ] as const)('%s: InvalidRequestError naming the parameter', async (_name, change, param) => {
    const failure = await failureOf(arerank(viaCohere(change as Partial<RerankRequest>)));
    expect(failure).toBeInstanceOf(InvalidRequestError);
    expect(failure).toMatchObject({ param });
    expect(cohere.requests).toHaveLength(0);
  });

  it('null top_n, max_tokens_per_doc and return_documents count as not given', async () => {
    const response = await arerank(viaCohere({ top_n: null, max_tokens_per_doc: null, return_documents: null }));
    expect(bodyOf(cohere.lastRequest)).toEqual({ model: 'rerank-v3.5', query: QUERY, documents: DOCUMENTS });
    expect(response.results).toHaveLength(DOCUMENTS.length);
  });

  it.each(['openai', 'anthropic', 'mistral', 'ollama'])('%s has no rerank: UnsupportedParameterError("rerank"), metadata says so', async (provider) => {
    const failure = await failureOf(arerank({ provider, api_key: 'k', api_base: cohere.url, model: 'm', query: QUERY, documents: DOCUMENTS }));
    expect(failure).toBeInstanceOf(UnsupportedParameterError);
    expect(failure).toMatchObject({ parameter_name: 'rerank', provider_name: provider });
    expect(cohere.requests).toHaveLength(0);
    expect(Hub.get_all_provider_metadata().find((metadata) => metadata.name === provider)?.rerank).toBe(false);
  });

  it('provider:model in the model string selects the provider', async () => {
    const { provider: _provider, ...request } = viaCohere();
    const response = await arerank({ ...request, model: 'cohere:rerank-v3.5' });
    expect(bodyOf(cohere.lastRequest).model).toBe('rerank-v3.5');
    expect(response.model).toBe('rerank-v3.5');
  });
});

describe('the Hub class', () => {
  it('Hub.arerank answers what arerank answers; its metadata says it reranks', async () => {
    const hub = Hub.create('cohere', { api_key: 'co-key', api_base: cohere.url });
    expect(hub.get_provider_metadata().rerank).toBe(true);
    const expected = await arerank(viaCohere({ top_n: 2, return_documents: true }));
    expect(await hub.arerank({ model: 'rerank-v3.5', query: QUERY, documents: DOCUMENTS, top_n: 2, return_documents: true })).toEqual(expected);
  });
});
