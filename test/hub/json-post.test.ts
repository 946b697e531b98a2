// Hub's JSON posts (src/hub/providers/openai/json-post.ts) must be indistinguishable from the openai SDK's own
// calls: the same request on the wire, the same answer, the same errors. Each case runs both against the fake.
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { acompletion } from '../../src/hub/index.ts';
import { createJsonPost, type JsonPost } from '../../src/hub/providers/openai/json-post.ts';
import { createNodeFetch } from '../../src/gateway/node-fetch.ts';
import { FakeOpenAIServer, chatCompletionBody, errorBody, type RecordedRequest, type ScriptedReply } from '../fakes/openai-compatible.ts';

const KEY = 'sk-json-post-0123456789';
const ROUTE = 'POST /v1/chat/completions';
const body = { model: 'fake-model-1', messages: [{ role: 'user' as const, content: 'Say hello' }], max_tokens: 16 };

let fake: FakeOpenAIServer;
beforeAll(async () => {
  fake = await FakeOpenAIServer.start();
});
afterAll(() => fake.close());
beforeEach(() => fake.reset());

const sdkClient = (options: Partial<ConstructorParameters<typeof OpenAI>[0]> = {}) =>
  new OpenAI({ apiKey: KEY, baseURL: fake.baseURL, maxRetries: 0, ...options });

function postOf(client: OpenAI, clientArgs?: Record<string, unknown>): JsonPost {
  const post = createJsonPost(client, clientArgs);
  if (!post) throw new Error('expected a JSON post for a plain client');
  return post;
}

/** What a call gave: its value (with _request_id) or its error's kind and fields. */
async function outcome(call: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    const value = await call;
    return { value, requestId: (value as { _request_id?: unknown } | null)?._request_id };
  } catch (error) {
    const api = error as InstanceType<typeof OpenAI.APIError>;
    return { error: api.constructor.name, message: api.message, status: api.status, body: api.error, retryAfter: api.headers?.get('retry-after') };
  }
}

/** The request as the provider saw it, without what differs by connection. */
const wire = (request: RecordedRequest) => {
  const { host: _host, connection: _connection, ...headers } = request.headers;
  return { method: request.method, path: request.path, query: request.query.toString(), headers, raw: request.raw.toString() };
};

/** Sends the same call through the SDK and through the JSON post, each after the same scripted reply. */
async function bothWays(reply: ScriptedReply | undefined, client = sdkClient()) {
  const post = postOf(client);
  if (reply) fake.script(ROUTE, reply);
  const sdk = await outcome(client.chat.completions.create(body));
  if (reply) fake.script(ROUTE, reply);
  const direct = await outcome(post('/chat/completions', body, undefined));
  const [sdkRequest, directRequest] = fake.requestsTo(ROUTE);
  return { sdk, direct, sdkRequest: wire(sdkRequest!), directRequest: wire(directRequest!) };
}

describe('JSON posts send and read as the SDK does', () => {
  it('a completion: the same request bytes and headers, the same answer and _request_id', async () => {
    const { sdk, direct, sdkRequest, directRequest } = await bothWays({ headers: { 'x-request-id': 'req_123' }, json: chatCompletionBody('fake-model-1') });
    expect(directRequest).toEqual(sdkRequest);
    expect(directRequest.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(directRequest.headers['x-stainless-lang']).toBe('js');
    expect(direct).toEqual(sdk);
    expect(direct.requestId).toBe('req_123');
    expect((direct.value as OpenAI.ChatCompletion).choices[0]!.message.content).toBe('Hello from the fake server');
  });

  it("a client's organization, project and default query reach the request as the SDK sends them", async () => {
    const client = sdkClient({ organization: 'org-1', project: 'proj-1', timeout: 30_000, defaultQuery: { 'api-version': '2024-10-21' } });
    const { sdk, direct, sdkRequest, directRequest } = await bothWays(undefined, client);
    expect(directRequest).toEqual(sdkRequest);
    expect(directRequest.headers).toMatchObject({ 'openai-organization': 'org-1', 'openai-project': 'proj-1' });
    expect(directRequest.query).toBe('api-version=2024-10-21');
    expect(direct).toEqual(sdk);
  });

  it.each<[string, ScriptedReply]>([
    ['400 with an error body', { status: 400, json: errorBody('bad request', 'invalid_request_error', 'bad', 'messages') }],
    ['401', { status: 401, json: errorBody('Incorrect API key provided') }],
    ['404', { status: 404, json: errorBody('no such model') }],
    ['429 with Retry-After', { status: 429, headers: { 'retry-after': '7' }, json: errorBody('slow down') }],
    ['500 with a text page', { status: 500, headers: { 'content-type': 'text/html' }, text: '<h1>oops</h1>' }],
    ['503 with an empty body', { status: 503, text: '' }],
    ['200 that is not JSON', { headers: { 'content-type': 'text/plain' }, text: 'plain words' }],
    ['200 with a JSON array', { json: [1, 2] }],
  ])('%s: the same error or value', async (_name, reply) => {
    const { sdk, direct, sdkRequest, directRequest } = await bothWays(reply);
    expect(directRequest).toEqual(sdkRequest);
    expect(direct).toEqual(sdk);
  });

  it('a provider slower than the timeout: APIConnectionTimeoutError both ways', async () => {
    const client = sdkClient({ timeout: 100 });
    const { sdk, direct } = await bothWays({ delayMs: 1_000, then: { json: chatCompletionBody('fake-model-1') } }, client);
    expect(sdk.error).toBe('APIConnectionTimeoutError');
    expect(direct).toEqual(sdk);
  });

  it('an abort in flight or before the call: APIUserAbortError both ways, and nothing is sent when already aborted', async () => {
    const client = sdkClient();
    const post = postOf(client);
    const results = [];
    for (const call of [(signal: AbortSignal) => client.chat.completions.create(body, { signal }), (signal: AbortSignal) => post('/chat/completions', body, signal)]) {
      fake.script(ROUTE, { delayMs: 2_000, then: { json: chatCompletionBody('fake-model-1') } });
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 50);
      results.push(await outcome(call(controller.signal)));
    }
    expect(results[0]!.error).toBe('APIUserAbortError');
    expect(results[1]).toEqual(results[0]);

    fake.reset();
    const aborted = AbortSignal.abort();
    expect(await outcome(post('/chat/completions', body, aborted))).toEqual(await outcome(client.chat.completions.create(body, { signal: aborted })));
    expect(fake.requestsTo(ROUTE)).toHaveLength(0);
  });

  it('a refused connection: APIConnectionError both ways', async () => {
    const closed = await FakeOpenAIServer.start();
    const baseURL = closed.baseURL;
    await closed.close();
    const client = sdkClient({ baseURL });
    const post = postOf(client);
    const sdk = await outcome(client.chat.completions.create(body));
    expect(sdk.error).toBe('APIConnectionError');
    expect(await outcome(post('/chat/completions', body, undefined))).toEqual(sdk);
  });

  it('a signal listener is not left behind on the caller’s signal', async () => {
    const post = postOf(sdkClient());
    const controller = new AbortController();
    let added = 0;
    let removed = 0;
    const { addEventListener, removeEventListener } = controller.signal;
    controller.signal.addEventListener = (...args: Parameters<AbortSignal['addEventListener']>) => (added++, addEventListener.apply(controller.signal, args));
    controller.signal.removeEventListener = (...args: Parameters<AbortSignal['removeEventListener']>) => (removed++, removeEventListener.apply(controller.signal, args));
    await post('/chat/completions', body, controller.signal);
    fake.script(ROUTE, { status: 500, json: errorBody('x') });
    await post('/chat/completions', body, controller.signal).catch(() => {});
    expect([added, removed]).toEqual([2, 2]);
  });
});

describe('which clients take the JSON post', () => {
  it('only a plain client: no retries, no request logging, no idempotency keys, no client_args but fetch', () => {
    expect(createJsonPost(sdkClient(), undefined)).toBeTypeOf('function');
    expect(createJsonPost(sdkClient({ fetch }), { fetch })).toBeTypeOf('function');
    expect(createJsonPost(sdkClient({ maxRetries: 2 }), undefined)).toBeUndefined();
    expect(createJsonPost(sdkClient({ logLevel: 'debug' }), undefined)).toBeUndefined();
    expect(createJsonPost(sdkClient({ logLevel: 'info' }), undefined)).toBeUndefined();
    expect(createJsonPost(sdkClient({ defaultHeaders: { 'x-a': '1' } }), { defaultHeaders: { 'x-a': '1' } })).toBeUndefined();
    expect(createJsonPost(sdkClient({ fetchOptions: {} }), { fetchOptions: {} })).toBeUndefined();
    class IdempotentClient extends OpenAI {
      protected override idempotencyHeader = 'idempotency-key';
    }
    expect(createJsonPost(new IdempotentClient({ apiKey: KEY, baseURL: fake.baseURL, maxRetries: 0 }), undefined)).toBeUndefined();
  });

  it("Hub's openai provider posts plain calls itself and leaves others to the SDK (seen by the fetch it was given)", async () => {
    const seen: unknown[] = [];
    const spy: typeof fetch = (input, init) => {
      seen.push(init?.headers);
      return fetch(input, init);
    };
    const request = { provider: 'openai', model: 'fake-model-1', api_base: fake.baseURL, api_key: KEY, messages: body.messages };
    const plain = await acompletion({ ...request, client_args: { fetch: spy } });
    const viaSdk = await acompletion({ ...request, client_args: { fetch: spy, defaultHeaders: { 'x-extra': 'yes' } } });
    expect(plain.choices[0]!.message.content).toBe(viaSdk.choices[0]!.message.content);
    expect(seen[0]).not.toBeInstanceOf(Headers);
    expect(Object.isFrozen(seen[0])).toBe(true);
    expect(seen[1]).toBeInstanceOf(Headers);
    const [first, second] = fake.requestsTo(ROUTE);
    expect(second!.headers['x-extra']).toBe('yes');
    const { 'x-extra': _extra, ...rest } = wire(second!).headers;
    expect(wire(first!).headers).toEqual(rest);
  });

  it("the gateway's node:http fetch sends a record's headers once each, whatever their case", async () => {
    const nodeFetch = createNodeFetch();
    const response = await nodeFetch(`${fake.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}`, 'X-Mixed-Case': 'v' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(200);
    const [request] = fake.requestsTo(ROUTE);
    expect(request!.headers).toMatchObject({ 'content-type': 'application/json', authorization: `Bearer ${KEY}`, 'x-mixed-case': 'v' });
    expect(request!.headers['content-length']).toBe(String(Buffer.byteLength(JSON.stringify(body))));
    expect(request!.body).toEqual(body);
  });
});
