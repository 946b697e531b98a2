import { Ajv2020 } from 'ajv/dist/2020.js';
import { CohereClientV2 } from 'cohere-ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cohereError, startCohereFake } from '../fakes/cohere.ts';
import { bodyOf, fakeRanking, type VendorServer } from '../fakes/vendor-server.ts';
import { startVoyageFake } from '../fakes/voyage.ts';
import { generateTinyCrossEncoder } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';
import { eventually, useBackends, useTestGateway, type TestGateway } from './helpers/gateway.ts';

/**
 * POST /v1/rerank (and /v2/rerank, the Cohere v2 client's path) through Hub's rerank: Cohere (its fake, asked by the
 * real cohere-ai client through the gateway), Voyage (its fake) and this project's encoder server with a real
 * cross-encoder. Keys, allowed_models, budgets and usage rows as for embeddings; pricing per search unit, per token,
 * or both.
 */
const backends = await useBackends();
let cohere: VendorServer;
let voyage: VendorServer;
let encoder: InProcessEncoder;

/** Prices dear enough that costs are large round numbers: $1 per search unit (Cohere), $1000 per million tokens (Voyage). */
const PRICING = {
  'cohere:rerank-v3.5': { search_unit_cost_per_thousand: 1000 },
  'voyage:rerank-2.5': { input_cost_per_million: 1000 },
  // both meters: $0.5 per search unit and $100 per million tokens
  'encoder:tiny-cross': { search_unit_cost_per_thousand: 500, input_cost_per_million: 100 },
};
const QUERY = 'capital of france';
const DOCUMENTS = ['the cat sat on the mat', 'paris is the capital of france', 'france borders spain', 'berlin is a capital'];

beforeAll(async () => {
  [cohere, voyage] = await Promise.all([startCohereFake(), startVoyageFake()]);
  // strict about model names (serve --strict-model-name), so that another name is the server's 404 model_not_found
  encoder = await serveInProcess(await generateTinyCrossEncoder(), 'tiny-cross', 'sequence_classification', { modelNames: { strict: true } });
});
afterAll(async () => {
  await cohere?.close();
  await voyage?.close();
  await encoder?.close();
});

/** The encoder server's own /v1/rerank answer, asked directly. */
async function encoderAnswer(body: Record<string, unknown>): Promise<{ results: { index: number; relevance_score: number }[]; usage: { prompt_tokens: number } }> {
  const response = await fetch(`${encoder.httpUrl}/v1/rerank`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(response.status).toBe(200);
  return (await response.json()) as { results: { index: number; relevance_score: number }[]; usage: { prompt_tokens: number } };
}

describe.each(backends)('rerank on $name', (backend) => {
  let gateway: TestGateway;
  let key: { id: string; key: string };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- usage rows are checked field by field
  const rows = async (): Promise<any[]> => (await gateway.call('GET', `/v1/keys/${key.id}/usage?limit=1000`)).json.data;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const rowOf = (requestId: string): Promise<any> => eventually(async () => (await rows()).find((row) => row.request_id === requestId && row.status !== 'pending'), `the usage row of ${requestId}`);
  const rerank = (body: unknown, requestId: string, options: { key?: string | null; path?: string } = {}) =>
    gateway.call('POST', options.path ?? '/v1/rerank', { key: options.key === undefined ? key.key : options.key, body, headers: { 'x-request-id': requestId } });

  useTestGateway(
    backend,
    () => ({
      providers: {
        cohere: { api_key: 'co-key', api_base: cohere.url },
        voyage: { api_key: 'vo-key', api_base: `${voyage.url}/v1` },
        encoder: { api_base: encoder.httpUrl },
        openai: { api_key: 'sk-unused', api_base: 'http://127.0.0.1:9/v1' },
      },
      pricing: PRICING,
    }),
    async (started) => {
      gateway = started;
      await gateway.call('POST', '/v1/users', { body: { user_id: 'rita', alias: 'Rita' } });
      key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'reranker', user_id: 'rita' } })).json;
    },
  );

  it.skipIf(backend.skipReason)('the cohere-ai v2 client against the gateway (/v2/rerank): Cohere\'s ranking; the row bills its search unit', async () => {
    const client = new CohereClientV2({ token: key.key, environment: gateway.url, maxRetries: 0 });
    const response = await client.rerank({ model: 'cohere:rerank-v3.5', query: QUERY, documents: DOCUMENTS, topN: 3 }, { headers: { 'x-request-id': `cohere-sdk-${backend.name}` } });
    expect(bodyOf(cohere.lastRequest)).toEqual({ model: 'rerank-v3.5', query: QUERY, documents: DOCUMENTS, top_n: 3 });
    expect(response.results).toEqual(fakeRanking(QUERY, DOCUMENTS, 3).map(({ index, relevance_score }) => ({ index, relevanceScore: relevance_score })));
    expect(response.id).toBe('rerank-fake');
    expect(response.meta?.billedUnits?.searchUnits).toBe(1);
    const row = await rowOf(`cohere-sdk-${backend.name}`);
    expect(row).toMatchObject({ endpoint: 'rerank', provider: 'cohere', model: 'rerank-v3.5', status: 'success', status_code: 200, search_units: 1, completion_tokens: 0 });
    // Cohere counts no tokens: the prompt is estimated (and priced at 0 here); the search unit costs $1
    expect(row.prompt_tokens).toBeGreaterThan(0);
    expect(row.cost).toBe(1);
  });

  it.skipIf(backend.skipReason)('150 documents are 2 search units (Cohere bills per 100): $2; return_documents gives the texts', async () => {
    const documents = Array.from({ length: 150 }, (_, i) => (i === 77 ? 'the capital of france is paris' : `document number ${i}`));
    const response = await rerank({ model: 'cohere:rerank-v3.5', query: QUERY, documents, top_n: 2, return_documents: true }, `cohere-150-${backend.name}`);
    expect(response.status).toBe(200);
    expect(response.json.results[0]).toEqual({ index: 77, relevance_score: fakeRanking(QUERY, documents)[0].relevance_score, document: { text: documents[77] } });
    expect(response.json.results).toHaveLength(2);
    expect(bodyOf(cohere.lastRequest)).not.toHaveProperty('return_documents');
    const row = await rowOf(`cohere-150-${backend.name}`);
    expect(row).toMatchObject({ search_units: 2, cost: 2 });
  });

  it.skipIf(backend.skipReason)("voyage: top_n reaches it as top_k, {text} documents as texts; the row bills Voyage's tokens", async () => {
    const response = await rerank({ model: 'voyage:rerank-2.5', query: QUERY, documents: DOCUMENTS.map((text) => ({ text })), top_n: 2 }, `voyage-${backend.name}`);
    expect(response.status).toBe(200);
    expect(bodyOf(voyage.lastRequest)).toEqual({ query: QUERY, documents: DOCUMENTS, model: 'rerank-2.5', top_k: 2 });
    expect(response.json.results).toEqual(fakeRanking(QUERY, DOCUMENTS, 2));
    const tokens = response.json.usage.prompt_tokens;
    expect(tokens).toBe([QUERY, ...DOCUMENTS].reduce((n, text) => n + text.split(/\s+/).length, 0) * DOCUMENTS.length);
    expect(response.json).not.toHaveProperty('meta');
    const row = await rowOf(`voyage-${backend.name}`);
    expect(row).toMatchObject({ endpoint: 'rerank', provider: 'voyage', prompt_tokens: tokens, search_units: 0 });
    expect(row.cost).toBeCloseTo((tokens * 1000) / 1e6, 9);
  });

  it.skipIf(backend.skipReason)("encoder:<name>: the cross-encoder server's own scores, best first; both meters billed", async () => {
    const direct = await encoderAnswer({ query: QUERY, documents: DOCUMENTS });
    const response = await rerank({ model: 'encoder:tiny-cross', query: QUERY, documents: DOCUMENTS, return_documents: true }, `encoder-${backend.name}`);
    expect(response.status).toBe(200);
    expect(response.json.model).toBe('tiny-cross');
    expect(response.json.results.map(({ index, relevance_score }: { index: number; relevance_score: number }) => ({ index, relevance_score }))).toEqual(direct.results);
    for (const result of response.json.results) expect(result.document).toEqual({ text: DOCUMENTS[result.index] });
    const scores = direct.results.map((result) => result.relevance_score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    const row = await rowOf(`encoder-${backend.name}`);
    expect(row).toMatchObject({ provider: 'encoder', model: 'tiny-cross', prompt_tokens: direct.usage.prompt_tokens, search_units: 1 });
    expect(row.cost).toBeCloseTo(0.5 + (direct.usage.prompt_tokens * 100) / 1e6, 9);
  });

  it.skipIf(backend.skipReason).each([
    ['no query', { documents: DOCUMENTS }, 'query'],
    ['an empty document list', { query: QUERY, documents: [] }, 'documents'],
    ['a document that is no text', { query: QUERY, documents: ['ok', { title: 'x' }] }, 'documents[1]'],
    ['an empty document', { query: QUERY, documents: ['ok', ''] }, 'documents[1]'],
    ['top_n 0', { query: QUERY, documents: DOCUMENTS, top_n: 0 }, 'top_n'],
    ['max_tokens_per_doc "9"', { query: QUERY, documents: DOCUMENTS, max_tokens_per_doc: '9' }, 'max_tokens_per_doc'],
    ['return_documents 1', { query: QUERY, documents: DOCUMENTS, return_documents: 1 }, 'return_documents'],
    ["Cohere v1's rank_fields (not supported: it would be ignored)", { query: QUERY, documents: DOCUMENTS, rank_fields: ['title'] }, 'rank_fields'],
    ['a Hub call option', { query: QUERY, documents: DOCUMENTS, api_base: 'http://elsewhere' }, 'api_base'],
    ['no model', { query: QUERY, documents: DOCUMENTS, model: undefined }, 'model'],
  ])('%s: 400 naming the field, nothing sent or recorded', async (_name, body, param) => {
    const sent = cohere.requests.length;
    const recorded = (await rows()).length;
    const response = await rerank({ model: 'cohere:rerank-v3.5', ...body }, `invalid-${backend.name}`);
    expect(response.status).toBe(400);
    expect(response.json.error).toMatchObject({ type: 'invalid_request_error', param });
    expect(cohere.requests).toHaveLength(sent);
    expect(await rows()).toHaveLength(recorded);
  });

  it.skipIf(backend.skipReason)("the provider's refusals: 429 with its Retry-After, a provider without rerank or an option it lacks → 400; rows say error", async () => {
    cohere.enqueue(cohereError(429, 'too many requests', { 'retry-after': '7' }));
    const limited = await rerank({ model: 'cohere:rerank-v3.5', query: QUERY, documents: DOCUMENTS }, `limited-${backend.name}`);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect(await rowOf(`limited-${backend.name}`)).toMatchObject({ status: 'error', status_code: 429, prompt_tokens: 0, search_units: 0, cost: 0 });

    const noRerank = await rerank({ model: 'openai:gpt-4o-mini', query: QUERY, documents: DOCUMENTS }, `openai-${backend.name}`);
    expect(noRerank.status).toBe(400);
    expect(noRerank.json.error.message).toMatch(/^Provider openai: .*rerank/);

    const unsupported = await rerank({ model: 'voyage:rerank-2.5', query: QUERY, documents: DOCUMENTS, max_tokens_per_doc: 64 }, `voyage-cut-${backend.name}`);
    expect(unsupported.status).toBe(400);
    expect(unsupported.json.error).toMatchObject({ param: 'max_tokens_per_doc' });

    await gateway.call('PUT', '/v1/pricing/encoder:other-model', { body: { search_unit_cost_per_thousand: 500 } });
    const otherModel = await rerank({ model: 'encoder:other-model', query: QUERY, documents: DOCUMENTS }, `encoder-other-${backend.name}`);
    expect(otherModel.status).toBe(400);
    expect(otherModel.json.error).toMatchObject({ code: 'model_not_found' });
    expect(await rowOf(`encoder-other-${backend.name}`)).toMatchObject({ provider: 'encoder', status: 'error', status_code: 400, cost: 0 });
  });

  it.skipIf(backend.skipReason)('allowed_models and the master key without a user are refused first; budgets spend the search units', async () => {
    const sent = cohere.requests.length;
    const limited = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'voyage-only', allowed_models: ['voyage:*'] } })).json;
    const refused = await rerank({ model: 'cohere:rerank-v3.5', query: QUERY, documents: DOCUMENTS }, `not-allowed-${backend.name}`, { key: limited.key });
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe('model_not_allowed');

    const master = await gateway.call('POST', '/v1/rerank', { body: { model: 'cohere:rerank-v3.5', query: QUERY, documents: DOCUMENTS } });
    expect(master.status).toBe(400);
    expect(master.json.error.code).toBe('missing_user');

    // none of them reached Cohere
    expect(cohere.requests.length).toBe(sent);

    // $1 per search unit against a $3.50 budget: a call is admitted when its hold (the ⌈documents / 100⌉ search units
    // Cohere may bill) fits what is left (docs/gateway.md, Budgets). $1, then $2, then a third $1 does not fit.
    const budget = (await gateway.call('POST', '/v1/budgets', { body: { max_budget: 3.5 } })).json;
    const poor = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'poor', budget_id: budget.budget_id } })).json;
    const first = await rerank({ model: 'cohere:rerank-v3.5', query: QUERY, documents: DOCUMENTS }, `budget-1-${backend.name}`, { key: poor.key });
    expect(first.status).toBe(200);
    expect((await gateway.call('GET', `/v1/budgets/${budget.budget_id}`)).json).toMatchObject({ spend: 1, reserved: 0 });
    const second = await rerank({ model: 'cohere:rerank-v3.5', query: QUERY, documents: Array.from({ length: 101 }, (_, i) => `doc ${i}`) }, `budget-2-${backend.name}`, { key: poor.key });
    expect(second.status).toBe(200);
    // 2 search units: $3 spent of $3.50, so the next ($1) is refused before reaching Cohere
    expect((await gateway.call('GET', `/v1/budgets/${budget.budget_id}`)).json).toMatchObject({ spend: 3 });
    const refusedByBudget = await rerank({ model: 'cohere:rerank-v3.5', query: QUERY, documents: DOCUMENTS }, `budget-3-${backend.name}`, { key: poor.key });
    expect(refusedByBudget.status).toBe(403);
    expect(refusedByBudget.json.error.code).toBe('budget_exceeded');
    expect(cohere.requests.length).toBe(sent + 2);
    // the master key with a user: charged to that user
    const named = await gateway.call('POST', '/v1/rerank', { body: { model: 'cohere:rerank-v3.5', query: QUERY, documents: DOCUMENTS, user: 'rita' }, headers: { 'x-request-id': `master-${backend.name}` } });
    expect(named.status).toBe(200);
    const userRows = (await gateway.call('GET', '/v1/users/rita/usage?limit=1000')).json.data;
    expect(userRows.find((row: { request_id: string }) => row.request_id === `master-${backend.name}`)).toMatchObject({ key_id: null, search_units: 1, cost: 1 });
  });

  it.skipIf(backend.skipReason)('a client that goes away during the call closes the provider connection; the row is cancelled and pays the estimate', async () => {
    const abandoned = cohere.abandonedReplies;
    const sent = cohere.requests.length;
    cohere.enqueue({ delayMs: 30_000, then: { json: {} } });
    const controller = new AbortController();
    const requestId = `leaves-${backend.name}`;
    const pending = fetch(`${gateway.url}/v1/rerank`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-hub-key': `Bearer ${key.key}`, 'x-request-id': requestId },
      body: JSON.stringify({ model: 'cohere:rerank-v3.5', query: QUERY, documents: DOCUMENTS }),
      signal: controller.signal,
    }).catch((error: unknown) => error);
    await eventually(() => (cohere.requests.length > sent ? true : undefined), 'the provider call');
    controller.abort();
    expect(await pending).toMatchObject({ name: 'AbortError' });
    await eventually(() => (cohere.abandonedReplies > abandoned ? true : undefined), 'the provider connection to close');
    const row = await rowOf(requestId);
    expect(row).toMatchObject({ endpoint: 'rerank', status: 'cancelled', status_code: 499, search_units: 1, cost: 1 });
    expect(row.prompt_tokens).toBeGreaterThan(0);
  });

  it.skipIf(backend.skipReason)('pricing per search unit through PUT /v1/pricing: token prices may be left out; an empty price is refused', async () => {
    const put = await gateway.call('PUT', '/v1/pricing/cohere:rerank-v3.5-lite', { body: { search_unit_cost_per_thousand: 2 } });
    expect(put.status).toBe(200);
    expect(put.json).toMatchObject({ model: 'cohere:rerank-v3.5-lite', input_cost_per_million: 0, output_cost_per_million: 0, search_unit_cost_per_thousand: 2 });
    expect((await gateway.call('GET', '/v1/pricing/cohere:rerank-v3.5-lite')).json.search_unit_cost_per_thousand).toBe(2);
    const response = await rerank({ model: 'cohere:rerank-v3.5-lite', query: QUERY, documents: DOCUMENTS }, `lite-${backend.name}`);
    expect(response.status).toBe(200);
    expect((await rowOf(`lite-${backend.name}`)).cost).toBeCloseTo(0.002, 12);
    for (const body of [{}, { search_unit_cost_per_thousand: 5000 }, { search_unit_cost_per_thousand: -1 }]) {
      const refused = await gateway.call('PUT', '/v1/pricing/cohere:rerank-v3.5-lite', { body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
    }
    // the configured prices were stored at start
    expect((await gateway.call('GET', '/v1/pricing/encoder:tiny-cross')).json).toMatchObject({ input_cost_per_million: 100, output_cost_per_million: 0, search_unit_cost_per_thousand: 500 });
  });

  it.skipIf(backend.skipReason)('answers match the OpenAPI document of /v1/rerank and /v2/rerank', async () => {
    const document = (await gateway.call('GET', '/openapi.json', { key: null })).json;
    const ajv = new Ajv2020({ strict: false });
    ajv.addSchema(document, 'openapi');
    const check = async (path: string, body: unknown) => {
      const response = await rerank(body, `schema-${backend.name}`, { path });
      const pointer = ['paths', path, 'post', 'responses', String(response.status), 'content', 'application/json', 'schema'].map((part) => encodeURIComponent(part.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');
      const validate = ajv.compile({ $ref: `openapi#/${pointer}` });
      expect(validate(response.json), `${path} → ${response.status}: ${ajv.errorsText(validate.errors)}`).toBe(true);
      return response.status;
    };
    expect(await check('/v1/rerank', { model: 'encoder:tiny-cross', query: QUERY, documents: DOCUMENTS, top_n: 1, return_documents: true })).toBe(200);
    expect(await check('/v2/rerank', { model: 'cohere:rerank-v3.5', query: QUERY, documents: DOCUMENTS })).toBe(200);
    expect(await check('/v1/rerank', { model: 'cohere:rerank-v3.5', query: '', documents: DOCUMENTS })).toBe(400);
    // the request schema accepts what the route accepts
    const validateRequest = ajv.compile({ $ref: 'openapi#/components/schemas/RerankRequest' });
    expect(validateRequest({ model: 'cohere:rerank-v3.5', query: QUERY, documents: ['a', { text: 'b' }], top_n: 1, max_tokens_per_doc: 9, return_documents: true, user: 'rita' })).toBe(true);
    expect(validateRequest({ model: 'cohere:rerank-v3.5', query: QUERY, documents: DOCUMENTS, rank_fields: ['x'] })).toBe(false);
  });
});
