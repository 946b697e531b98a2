// A fake of the Anthropic API on loopback: /v1/messages (JSON and SSE), /v1/messages/count_tokens, /v1/models (paged),
// /v1/messages/batches.
// Shapes follow the API reference: error bodies are {type: "error", error: {type, message}}.

import { VendorServer, type RecordedRequest, type Reply, type Route } from './vendor-server.ts';

export interface AnthropicFake {
  server: VendorServer;
  /** Retrieves a batch must see before it ends (polling). */
  pollsUntilEnded: number;
  close(): Promise<void>;
}

const MODELS = [
  { type: 'model', id: 'claude-opus-4-5', display_name: 'Claude Opus 4.5', created_at: '2025-11-01T00:00:00Z' },
  { type: 'model', id: 'claude-sonnet-4-6', display_name: 'Claude Sonnet 4.6', created_at: '2025-09-29T00:00:00Z' },
  { type: 'model', id: 'claude-haiku-4-5', display_name: 'Claude Haiku 4.5', created_at: '2025-10-01T00:00:00Z' },
];

export const anthropicError = (status: number, type: string, message: string, headers?: Record<string, string>): Reply => ({
  status,
  headers: { 'request-id': 'req_fake', ...headers },
  json: { type: 'error', error: { type, message } },
});

function lastUserText(body: Record<string, unknown>): string {
  const messages = (body.messages ?? []) as { role: string; content: unknown }[];
  const last = messages.at(-1);
  if (!last) return '';
  if (typeof last.content === 'string') return last.content;
  return ((last.content as { type: string; text?: string }[]).find((b) => b.type === 'text')?.text ?? '').toString();
}

/** What the fake count_tokens answers: 7 plus one token per character of the last user text (no estimate gives that). */
export const fakeInputTokens = (body: Record<string, unknown>) => 7 + lastUserText(body).length;

/** The reply of the fake model: "echo: <last user text>". */
export function fakeMessage(body: Record<string, unknown>) {
  const text = `echo: ${lastUserText(body)}`;
  return {
    id: 'msg_fake01',
    type: 'message',
    role: 'assistant',
    model: body.model,
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 11, output_tokens: text.split(' ').length, cache_read_input_tokens: 3, cache_creation_input_tokens: 0 },
  };
}

/** The same reply as SSE events, in the order the API sends them. */
export function fakeMessageEvents(body: Record<string, unknown>): { event: string; data: unknown }[] {
  const message = fakeMessage(body);
  const text = message.content[0].text;
  const pieces = text.match(/.{1,4}/gs) ?? [];
  return [
    { event: 'message_start', data: { type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { ...message.usage, output_tokens: 1 } } } },
    { event: 'content_block_start', data: { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } } },
    { event: 'ping', data: { type: 'ping' } },
    ...pieces.map((piece) => ({ event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: piece } } })),
    { event: 'content_block_stop', data: { type: 'content_block_stop', index: 0 } },
    { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: message.usage.output_tokens } } },
    { event: 'message_stop', data: { type: 'message_stop' } },
  ];
}

interface FakeBatch {
  id: string;
  requests: { custom_id: string; params: Record<string, unknown> }[];
  created_at: string;
  polls: number;
  cancelled: boolean;
}

export async function startAnthropicFake(): Promise<AnthropicFake> {
  const batches: FakeBatch[] = [];
  const fake = { pollsUntilEnded: 2 } as AnthropicFake;

  // the API takes the key as x-api-key or as a bearer token
  const authorised = (request: RecordedRequest): Reply | null => {
    const key = request.headers['x-api-key'] ?? request.headers.authorization?.replace(/^Bearer /, '');
    if (!key) return anthropicError(401, 'authentication_error', 'x-api-key header is required');
    return key === 'bad-key' ? anthropicError(401, 'authentication_error', 'invalid x-api-key') : null;
  };

  const batchObject = (batch: FakeBatch, host: string | undefined) => {
    const ended = batch.cancelled || batch.polls >= fake.pollsUntilEnded;
    const n = batch.requests.length;
    return {
      id: batch.id,
      type: 'message_batch',
      processing_status: ended ? 'ended' : batch.cancelled ? 'canceling' : 'in_progress',
      request_counts: {
        processing: ended ? 0 : n,
        succeeded: ended && !batch.cancelled ? n : 0,
        errored: 0,
        canceled: ended && batch.cancelled ? n : 0,
        expired: 0,
      },
      ended_at: ended ? '2026-11-22T01:00:00Z' : null,
      created_at: batch.created_at,
      expires_at: '2026-11-23T00:00:00Z',
      archived_at: null,
      cancel_initiated_at: batch.cancelled ? '2026-11-22T00:30:00Z' : null,
      results_url: ended ? `http://${host}/v1/messages/batches/${batch.id}/results` : null,
    };
  };
  const findBatch = (id: string) => batches.find((b) => b.id === id);
  const notFound = (id: string) => anthropicError(404, 'not_found_error', `No batch found with id ${id}`);

  const routes: Route[] = [
    {
      method: 'POST',
      path: /^\/v1\/messages$/,
      handle(request) {
        const denied = authorised(request);
        if (denied) return denied;
        const body = request.json as Record<string, unknown>;
        if (!body || typeof body.max_tokens !== 'number') return anthropicError(400, 'invalid_request_error', 'max_tokens: Field required');
        return body.stream ? { sse: fakeMessageEvents(body) } : { json: fakeMessage(body) };
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/messages\/count_tokens$/,
      handle(request) {
        const denied = authorised(request);
        if (denied) return denied;
        const body = request.json as Record<string, unknown>;
        if (!body || typeof body.model !== 'string' || !Array.isArray(body.messages)) return anthropicError(400, 'invalid_request_error', 'messages: Field required');
        return { json: { input_tokens: fakeInputTokens(body) } };
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/models$/,
      handle(request) {
        const limit = Number(request.query.get('limit') ?? 2);
        const after = request.query.get('after_id');
        const start = after ? MODELS.findIndex((m) => m.id === after) + 1 : 0;
        const data = MODELS.slice(start, start + limit);
        return { json: { data, has_more: start + limit < MODELS.length, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null } };
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/messages\/batches$/,
      handle(request) {
        const body = request.json as { requests?: FakeBatch['requests'] };
        if (!Array.isArray(body?.requests) || body.requests.length === 0) return anthropicError(400, 'invalid_request_error', 'requests: Field required');
        const batch: FakeBatch = {
          id: `msgbatch_${String(batches.length + 1).padStart(4, '0')}`,
          requests: body.requests,
          created_at: new Date(Date.UTC(2026, 10, 22, 0, batches.length)).toISOString(),
          polls: 0,
          cancelled: false,
        };
        batches.push(batch);
        return { json: batchObject(batch, request.headers.host) };
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/messages\/batches$/,
      handle(request) {
        // newest first; after_id pages towards older batches
        const ordered = [...batches].reverse();
        const after = request.query.get('after_id');
        const limit = Number(request.query.get('limit') ?? 20);
        const start = after ? ordered.findIndex((b) => b.id === after) + 1 : 0;
        const page = ordered.slice(start, start + limit);
        return {
          json: {
            data: page.map((b) => batchObject(b, request.headers.host)),
            has_more: start + limit < ordered.length,
            first_id: page[0]?.id ?? null,
            last_id: page.at(-1)?.id ?? null,
          },
        };
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/messages\/batches\/([^/]+)$/,
      handle(request, match) {
        const batch = findBatch(match[1]);
        if (!batch) return notFound(match[1]);
        batch.polls += 1;
        return { json: batchObject(batch, request.headers.host) };
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/messages\/batches\/([^/]+)\/cancel$/,
      handle(request, match) {
        const batch = findBatch(match[1]);
        if (!batch) return notFound(match[1]);
        batch.cancelled = true;
        return { json: { ...batchObject(batch, request.headers.host), processing_status: 'canceling', ended_at: null, results_url: null } };
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/messages\/batches\/([^/]+)\/results$/,
      handle(_request, match) {
        const batch = findBatch(match[1]);
        if (!batch) return notFound(match[1]);
        const lines = batch.requests.map((r, i) =>
          i === 1
            ? { custom_id: r.custom_id, result: { type: 'errored', error: { type: 'error', error: { type: 'invalid_request_error', message: 'bad request line' } } } }
            : { custom_id: r.custom_id, result: { type: 'succeeded', message: fakeMessage(r.params) } },
        );
        return { text: lines.map((l) => JSON.stringify(l)).join('\n') + '\n', contentType: 'application/binary' };
      },
    },
  ];

  fake.server = await VendorServer.start(routes);
  fake.close = () => fake.server.close();
  return fake;
}
