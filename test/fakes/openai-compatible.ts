// A fake OpenAI-compatible server on loopback, speaking the real wire protocol the `openai` SDK uses:
// chat completions (JSON and SSE), embeddings, models, files (multipart upload, content), batches, responses.
//
//   const fake = await FakeOpenAIServer.start();      // port 0 on 127.0.0.1; fake.baseURL ends in /v1
//                                                    // ({ record: false }: keeps no requests, for load)
//   fake.script('POST /v1/chat/completions', { status: 429, headers: { 'retry-after': '0' }, json: {...} });
//   ... call the client ...
//   fake.requests                                    // every request: method, path, query, headers, body
//   await fake.close();
//
// Without a script a route answers with its default (a small completion, deterministic embeddings, ...); the usage
// the defaults report is exported (CHAT_USAGE, chatStreamUsage, EMBEDDING_TOKENS_PER_INPUT) so tests can check
// counts and costs computed from it. Scripted replies are consumed in order, per route ("METHOD /path", path
// without query).

import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closedWithin } from './vendor-server.ts';

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  /** Parsed JSON when the body is JSON; the raw text otherwise (multipart uploads). */
  body: unknown;
  raw: Buffer;
}

export type ScriptedReply =
  /** A JSON answer. */
  | { status?: number; headers?: Record<string, string>; json: unknown }
  /** A text answer (e.g. a non-JSON error page). */
  | { status?: number; headers?: Record<string, string>; text: string }
  /**
   * An SSE stream of `data:` events, then `data: [DONE]` unless `done: false`. `cut: true` destroys the socket after
   * the events (a connection lost in the middle). `hold: true` keeps the stream open after the events until the
   * client closes it (a provider that stalls), counted in `abandonedStreams`. `delayMs` waits before each event.
   */
  | { status?: number; headers?: Record<string, string>; sse: unknown[]; done?: boolean; cut?: boolean; hold?: boolean; delayMs?: number }
  /**
   * Waits, then answers (a slow provider, for timeouts). A client that closes the connection meanwhile gets nothing
   * and is counted in `abandonedReplies`.
   */
  | { delayMs: number; then: ScriptedReply }
  /** Destroys the socket without answering. */
  | { destroy: true };

export type RouteHandler = (request: RecordedRequest) => ScriptedReply;

interface StoredFile {
  id: string;
  filename: string;
  purpose: string;
  content: string;
}

export interface FakeBatch {
  id: string;
  object: 'batch';
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  status: string;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: number;
  metadata: Record<string, string> | null;
  request_counts: { total: number; completed: number; failed: number };
  [key: string]: unknown;
}

export const FAKE_MODEL_IDS = ['fake-model-1', 'fake-model-2', 'fake-embedder'];

/** The default non-streaming completion text. */
export const DEFAULT_COMPLETION_TEXT = 'Hello from the fake server';

/** The usage of the default non-streaming completion (4 of its prompt tokens read from the provider's cache). */
export const CHAT_USAGE = { prompt_tokens: 12, completion_tokens: 6, total_tokens: 18, prompt_tokens_details: { cached_tokens: 4 } };

/** The text pieces of the default streamed answer. */
export const DEFAULT_STREAM_PIECES: readonly string[] = ['Hello', ' from', ' the fake'];

/** The usage a streamed answer reports in its last chunk: 10 prompt tokens, one completion token per text piece. */
export function chatStreamUsage(pieces: readonly string[] = DEFAULT_STREAM_PIECES) {
  return { prompt_tokens: 10, completion_tokens: pieces.length, total_tokens: 10 + pieces.length };
}

/** The prompt tokens the default embeddings answer reports for each input. */
export const EMBEDDING_TOKENS_PER_INPUT = 3;

export function chatCompletionBody(model: string, text = DEFAULT_COMPLETION_TEXT, extra: Record<string, unknown> = {}) {
  return {
    id: 'chatcmpl-fake-1',
    object: 'chat.completion',
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, finish_reason: 'stop', logprobs: null }],
    usage: structuredClone(CHAT_USAGE),
    ...extra,
  };
}

/** A text answer as the chunks the OpenAI API streams (role chunk, text pieces, finish, usage). */
export function chatChunks(model: string, pieces: readonly string[] = DEFAULT_STREAM_PIECES, finish = 'stop'): unknown[] {
  const base = { id: 'chatcmpl-fake-stream', object: 'chat.completion.chunk', created: 1_700_000_000, model };
  return [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
    ...pieces.map((content) => ({ ...base, choices: [{ index: 0, delta: { content }, finish_reason: null }] })),
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }] },
    { ...base, choices: [], usage: chatStreamUsage(pieces) },
  ];
}

/**
 * A deterministic embedding of a text (4 numbers). With `dimensions` (as a request asks) it has that many numbers:
 * the 4 repeated, or the first ones.
 */
export function fakeEmbedding(text: string, dimensions?: number): number[] {
  const base = fakeEmbedding4(text);
  return dimensions === undefined ? base : Array.from({ length: dimensions }, (_, i) => base[i % base.length]);
}

function fakeEmbedding4(text: string): number[] {
  let h = 0;
  for (const ch of text) h = (h * 31 + ch.codePointAt(0)!) % 1000;
  return [text.length, h / 1000, 0.5, -0.25];
}

export class FakeOpenAIServer {
  /** Every request received (none when started with `record: false`). */
  readonly requests: RecordedRequest[] = [];
  /** Held SSE replies (`hold: true`) whose connection the client closed. */
  abandonedStreams = 0;
  /** Delayed replies (`{delayMs, then}`) whose client closed the connection before the answer was sent. */
  abandonedReplies = 0;
  readonly files = new Map<string, StoredFile>();
  readonly batches = new Map<string, FakeBatch>();
  readonly #scripts = new Map<string, ScriptedReply[]>();
  readonly #handlers = new Map<string, RouteHandler>();
  readonly #server: Server;
  #counter = 0;
  #control = false;
  readonly #record: boolean;

  private constructor(server: Server, record: boolean) {
    this.#server = server;
    this.#record = record;
  }

  /** `record: false` keeps no requests: for load (benchmarks, thousands of calls) where nothing reads them. */
  static async start(options: { record?: boolean } = {}): Promise<FakeOpenAIServer> {
    const holder: { fake?: FakeOpenAIServer } = {};
    const server = createServer((req, res) => {
      void holder.fake!.#handle(req, res);
    });
    // Node's 5 s default would drop a client's pooled connections between bursts of load (a race with its next call).
    server.keepAliveTimeout = 60_000;
    const fake = new FakeOpenAIServer(server, options.record !== false);
    holder.fake = fake;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  /** The server's origin, e.g. http://127.0.0.1:40123 */
  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The OpenAI-style base address (origin + /v1), what `api_base` / `baseURL` take. */
  get baseURL(): string {
    return `${this.origin}/v1`;
  }

  /** Queues replies for a route, e.g. script('POST /v1/chat/completions', {status: 500, json: {...}}). */
  script(route: string, ...replies: ScriptedReply[]): void {
    const queue = this.#scripts.get(route) ?? [];
    queue.push(...replies);
    this.#scripts.set(route, queue);
  }

  /** Replaces a route's default behaviour. */
  handle(route: string, handler: RouteHandler): void {
    this.#handlers.set(route, handler);
  }

  /** Requests to a route ("METHOD /path"). */
  requestsTo(route: string): RecordedRequest[] {
    return this.requests.filter((r) => `${r.method} ${r.path}` === route);
  }

  /**
   * Lets another process script this server: POST /__fake/script {route, replies}, GET /__fake/requests,
   * POST /__fake/reset, GET /__fake/stats (the abandoned counters). Used when the server runs in a child process
   * (the synchronous forms block their thread).
   */
  enableControlRoutes(): void {
    this.#control = true;
  }

  /** Forgets requests, scripts and custom handlers (files and batches stay). */
  reset(): void {
    this.requests.length = 0;
    this.#scripts.clear();
    this.#handlers.clear();
  }

  /** Finishes a batch: every input line gets a chat completion answer (lines whose body has "fail": true fail). */
  completeBatch(id: string): FakeBatch {
    return this.#finishBatch(id, 'completed', Number.POSITIVE_INFINITY, true);
  }

  /**
   * Ends a batch before all its lines ran, as OpenAI does when the completion window passes (`expired`) or after a
   * cancel (`cancelled`): the first `answered` lines have their answers (or failures) in the output (error) file; the
   * rest are written to the error file with code `batch_expired` / `batch_cancelled`, as OpenAI documents — or, with
   * `unreported: true`, appear in no file at all (as a service that writes nothing for lines it never ran).
   */
  endBatchEarly(id: string, status: 'expired' | 'cancelled', answered: number, options: { unreported?: boolean } = {}): FakeBatch {
    return this.#finishBatch(id, status, answered, options.unreported !== true);
  }

  #finishBatch(id: string, status: 'completed' | 'expired' | 'cancelled', answered: number, reportRest: boolean): FakeBatch {
    const batch = this.batches.get(id);
    if (!batch) throw new Error(`no batch ${id}`);
    const input = this.files.get(batch.input_file_id)?.content ?? '';
    const out: string[] = [];
    const errors: string[] = [];
    let total = 0;
    for (const line of input.split('\n')) {
      if (line.trim() === '') continue;
      const item = JSON.parse(line) as { custom_id: string; body: { model: string; fail?: boolean } };
      const ran = total < answered;
      total += 1;
      if (!ran) {
        const error =
          status === 'expired'
            ? { code: 'batch_expired', message: 'This request could not be executed before the completion window expired.' }
            : { code: 'batch_cancelled', message: 'This request was not executed because the batch was cancelled.' };
        if (reportRest) errors.push(JSON.stringify({ id: `req-${item.custom_id}`, custom_id: item.custom_id, response: null, error }));
      } else if (item.body.fail) {
        errors.push(JSON.stringify({ id: `req-${item.custom_id}`, custom_id: item.custom_id, response: null, error: { code: 'invalid_request', message: 'line failed' } }));
      } else {
        out.push(
          JSON.stringify({
            id: `req-${item.custom_id}`,
            custom_id: item.custom_id,
            response: { status_code: 200, request_id: 'r', body: chatCompletionBody(item.body.model, `answer ${item.custom_id}`) },
            error: null,
          }),
        );
      }
    }
    batch.output_file_id = out.length > 0 || status === 'completed' ? this.#storeFile('batch_output.jsonl', 'batch_output', out.join('\n') + '\n').id : null;
    batch.error_file_id = errors.length > 0 ? this.#storeFile('batch_errors.jsonl', 'batch_output', errors.join('\n') + '\n').id : null;
    batch.status = status;
    batch.request_counts = { total, completed: out.length, failed: total - out.length };
    return batch;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #nextId(prefix: string): string {
    this.#counter += 1;
    return `${prefix}-${String(this.#counter).padStart(4, '0')}`;
  }

  #storeFile(filename: string, purpose: string, content: string): StoredFile {
    const file = { id: this.#nextId('file'), filename, purpose, content };
    this.files.set(file.id, file);
    return file;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', this.origin);
    let body: unknown = raw.toString('utf8');
    if ((req.headers['content-type'] ?? '').includes('application/json') && raw.length > 0) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        // keep the text
      }
    }
    if (this.#control && url.pathname.startsWith('/__fake/')) return this.#controlRoute(url.pathname, body, res);
    const recorded: RecordedRequest = { method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, headers: req.headers, body, raw };
    if (this.#record) this.requests.push(recorded);
    const route = `${recorded.method} ${recorded.path}`;
    const queue = this.#scripts.get(route);
    let reply: ScriptedReply;
    if (queue && queue.length > 0) reply = queue.shift()!;
    else {
      const custom = this.#handlers.get(route);
      reply = custom ? custom(recorded) : await this.#default(recorded);
    }
    await this.#send(res, reply);
  }

  #controlRoute(path: string, body: unknown, res: ServerResponse): void {
    let answer: unknown = { ok: true };
    if (path === '/__fake/script') {
      const { route, replies } = (typeof body === 'string' ? JSON.parse(body) : body) as { route: string; replies: ScriptedReply[] };
      this.script(route, ...replies);
    } else if (path === '/__fake/reset') {
      this.reset();
    } else if (path === '/__fake/requests') {
      answer = this.requests.map((r) => ({ method: r.method, path: r.path, query: r.query.toString(), headers: r.headers, body: r.body }));
    } else if (path === '/__fake/stats') {
      answer = { abandonedStreams: this.abandonedStreams, abandonedReplies: this.abandonedReplies };
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer));
  }

  async #send(res: ServerResponse, reply: ScriptedReply): Promise<void> {
    if ('destroy' in reply) {
      res.socket?.destroy();
      return;
    }
    if ('then' in reply) {
      if (await closedWithin(res, reply.delayMs)) {
        this.abandonedReplies++;
        return;
      }
      return this.#send(res, reply.then);
    }
    const status = reply.status ?? 200;
    if ('json' in reply) {
      res.writeHead(status, { 'content-type': 'application/json', ...reply.headers });
      res.end(JSON.stringify(reply.json));
      return;
    }
    if ('text' in reply) {
      res.writeHead(status, { 'content-type': 'text/plain', ...reply.headers });
      res.end(reply.text);
      return;
    }
    res.writeHead(status, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...reply.headers });
    res.flushHeaders();
    if (reply.hold) res.once('close', () => this.abandonedStreams++);
    for (const event of reply.sse) {
      if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
      const typed = event as { type?: unknown };
      // Responses API events carry an `event:` line too.
      const prefix = typeof typed.type === 'string' && typed.type.startsWith('response.') ? `event: ${typed.type}\n` : '';
      res.write(`${prefix}data: ${JSON.stringify(event)}\n\n`);
    }
    if (reply.cut) {
      // Give the written events a moment to leave, then drop the connection without [DONE] or a last chunk.
      await new Promise((resolve) => setTimeout(resolve, 20));
      res.socket?.destroy();
      return;
    }
    if (reply.hold) return;
    if (reply.done !== false) res.write('data: [DONE]\n\n');
    res.end();
  }

  async #default(req: RecordedRequest): Promise<ScriptedReply> {
    const route = `${req.method} ${req.path}`;
    const body = (typeof req.body === 'object' && req.body !== null ? req.body : {}) as Record<string, unknown>;
    if (route === 'POST /v1/chat/completions') {
      const model = String(body.model ?? 'unknown');
      if (body.stream) return { sse: chatChunks(model) };
      return { json: chatCompletionBody(model) };
    }
    if (route === 'POST /v1/embeddings') {
      const inputs = Array.isArray(body.input) ? (body.input as string[]) : [String(body.input)];
      const dimensions = typeof body.dimensions === 'number' ? body.dimensions : undefined;
      return {
        json: {
          object: 'list',
          model: body.model,
          // The SDK asks for base64 (little-endian float32) unless the caller chose a format.
          data: inputs.map((text, index) => ({
            object: 'embedding',
            index,
            embedding:
              body.encoding_format === 'base64'
                ? Buffer.from(new Float32Array(fakeEmbedding(text, dimensions)).buffer).toString('base64')
                : fakeEmbedding(text, dimensions),
          })),
          usage: { prompt_tokens: inputs.length * EMBEDDING_TOKENS_PER_INPUT, total_tokens: inputs.length * EMBEDDING_TOKENS_PER_INPUT },
        },
      };
    }
    if (route === 'GET /v1/models') {
      return { json: { object: 'list', data: FAKE_MODEL_IDS.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'fake' })) } };
    }
    if (route === 'POST /v1/responses') {
      const response = responseBody(String(body.model ?? 'unknown'));
      if (body.stream) {
        const pending = { ...response, status: 'in_progress', output: [], output_text: '' };
        return {
          sse: [
            { type: 'response.created', sequence_number: 0, response: pending },
            { type: 'response.output_text.delta', sequence_number: 1, item_id: 'msg-fake-1', output_index: 0, content_index: 0, delta: 'Hello from', logprobs: [] },
            { type: 'response.output_text.delta', sequence_number: 2, item_id: 'msg-fake-1', output_index: 0, content_index: 0, delta: ' the fake server', logprobs: [] },
            { type: 'response.completed', sequence_number: 3, response },
          ],
          done: false,
        };
      }
      return { json: response };
    }
    if (route === 'POST /v1/files') return this.#upload(req);
    const fileContent = /^GET \/v1\/files\/([^/]+)\/content$/.exec(route);
    if (fileContent) {
      const file = this.files.get(fileContent[1]!);
      if (!file) return notFound(`No such File object: ${fileContent[1]}`);
      return { text: file.content, headers: { 'content-type': 'application/octet-stream' } };
    }
    if (route === 'POST /v1/batches') {
      const input = this.files.get(String(body.input_file_id));
      if (!input) return notFound(`No such File object: ${String(body.input_file_id)}`);
      const batch: FakeBatch = {
        id: this.#nextId('batch'),
        object: 'batch',
        endpoint: String(body.endpoint),
        input_file_id: input.id,
        completion_window: String(body.completion_window),
        status: 'validating',
        output_file_id: null,
        error_file_id: null,
        created_at: 1_700_000_000 + this.#counter,
        metadata: (body.metadata as Record<string, string> | undefined) ?? null,
        request_counts: { total: 0, completed: 0, failed: 0 },
      };
      this.batches.set(batch.id, batch);
      return { json: batch };
    }
    if (route === 'GET /v1/batches') {
      const all = [...this.batches.values()].sort((a, b) => b.created_at - a.created_at);
      const after = req.query.get('after');
      const start = after ? all.findIndex((b) => b.id === after) + 1 : 0;
      const limit = Number(req.query.get('limit') ?? 20);
      const page = all.slice(start, start + limit);
      return {
        json: {
          object: 'list',
          data: page,
          first_id: page[0]?.id ?? null,
          last_id: page.at(-1)?.id ?? null,
          has_more: start + limit < all.length,
        },
      };
    }
    const batchRoute = /^(GET|POST) \/v1\/batches\/([^/]+)(\/cancel)?$/.exec(route);
    if (batchRoute) {
      const batch = this.batches.get(batchRoute[2]!);
      if (!batch) return notFound(`No batch found with id '${batchRoute[2]}'`);
      if (batchRoute[3]) {
        if (batch.status === 'completed' || batch.status === 'failed') {
          return { status: 409, json: { error: { message: `Cannot cancel a batch with status '${batch.status}'`, type: 'invalid_request_error', code: null, param: null } } };
        }
        batch.status = 'cancelled';
      }
      return { json: batch };
    }
    return notFound(`Unknown route ${route}`);
  }

  async #upload(req: RecordedRequest): Promise<ScriptedReply> {
    const request = new Request(`${this.origin}${req.path}`, {
      method: 'POST',
      headers: { 'content-type': String(req.headers['content-type']) },
      body: new Uint8Array(req.raw),
    });
    const form = await request.formData();
    const file = form.get('file');
    if (!(file instanceof Blob)) return { status: 400, json: { error: { message: 'file is required', type: 'invalid_request_error', code: null, param: 'file' } } };
    const stored = this.#storeFile((file as File).name ?? 'upload.jsonl', String(form.get('purpose')), await file.text());
    return {
      json: { id: stored.id, object: 'file', bytes: stored.content.length, created_at: 1_700_000_000, filename: stored.filename, purpose: stored.purpose, status: 'processed' },
    };
  }
}

function notFound(message: string): ScriptedReply {
  return { status: 404, json: { error: { message, type: 'invalid_request_error', code: 'not_found', param: null } } };
}

export function responseBody(model: string, text = DEFAULT_COMPLETION_TEXT) {
  return {
    id: 'resp-fake-1',
    object: 'response',
    created_at: 1_700_000_000,
    status: 'completed',
    model,
    output: [
      { type: 'message', id: 'msg-fake-1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] },
    ],
    output_text: text,
    usage: { input_tokens: 5, output_tokens: 5, total_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    error: null,
    incomplete_details: null,
    instructions: null,
    metadata: {},
    temperature: 1,
    top_p: 1,
  };
}

/** An OpenAI-style error body. */
export function errorBody(message: string, type = 'invalid_request_error', code: string | null = null, param: string | null = null) {
  return { error: { message, type, code, param } };
}
