import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small, fast fake of an OpenAI-compatible provider on loopback, for the gateway's tests and benchmark. It
 * speaks the real wire format (JSON bodies, SSE chunks, `data: [DONE]`, OpenAI error bodies) and behaves by model
 * name: `rate-limited` (429, Retry-After: 7), `bad-request` (400), `server-error` (500), `unauthorized` (401),
 * `cut-stream` (two chunks, then the socket is destroyed), `slow-stream` (one chunk, then nothing until the
 * client goes away; counted in `abandonedStreams`), `slow-<ms>` (answers after ms), anything else answers.
 * Every answer uses PROMPT_TOKENS and COMPLETION_TOKENS.
 */
export const PROMPT_TOKENS = 10;
export const COMPLETION_TOKENS = 5;

export interface FakeOpenAi {
  url: string;
  /** Bodies of the chat completion requests received, in order. */
  chatBodies: Record<string, unknown>[];
  requests: number;
  /** `slow-stream` responses whose client (the gateway) closed the connection. */
  abandonedStreams: number;
  close(): Promise<void>;
}

const error = (res: http.ServerResponse, status: number, message: string, type: string, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ error: { message, type, code: null, param: null } }));
};

export async function startFakeOpenAi(options: { record?: boolean } = {}): Promise<FakeOpenAi> {
  const fake: FakeOpenAi = { url: '', chatBodies: [], requests: 0, abandonedStreams: 0, close: async () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      fake.requests++;
      const body = chunks.length > 0 ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>) : {};
      const model = String(body.model ?? '');
      const answer = () => route(req, res, body, fake, options.record !== false);
      const slow = /^slow-(\d+)$/.exec(model);
      if (slow) setTimeout(answer, Number(slow[1]));
      else answer();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return fake;
}

function route(req: http.IncomingMessage, res: http.ServerResponse, body: Record<string, unknown>, fake: FakeOpenAi, record: boolean): void {
  const model = String(body.model ?? '');
  if (req.method === 'GET' && req.url === '/v1/models') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'list', data: [{ id: 'gpt-fake', object: 'model', created: 1_700_000_000, owned_by: 'fake' }, { id: 'embed-fake', object: 'model', created: 1_700_000_000, owned_by: 'fake' }] }));
    return;
  }
  if (model === 'rate-limited') return error(res, 429, 'Rate limit reached for requests', 'requests', { 'retry-after': '7' });
  if (model === 'bad-request') return error(res, 400, "Invalid value for 'temperature'", 'invalid_request_error');
  if (model === 'server-error') return error(res, 500, 'The server had an error while processing your request', 'server_error');
  if (model === 'unauthorized') return error(res, 401, 'Incorrect API key provided: sk-secret123456789', 'invalid_request_error');
  if (req.method === 'POST' && req.url === '/v1/embeddings') {
    const inputs = (Array.isArray(body.input) ? body.input : [body.input]) as string[];
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        object: 'list',
        model,
        data: inputs.map((input, index) => {
          const vector = [input.length, 0.5, -0.25];
          // Like OpenAI: base64 of little-endian float32 when asked (the openai client asks by default).
          const embedding = body.encoding_format === 'base64' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector;
          return { object: 'embedding', index, embedding };
        }),
        usage: { prompt_tokens: PROMPT_TOKENS * inputs.length, total_tokens: PROMPT_TOKENS * inputs.length },
      }),
    );
    return;
  }
  if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return error(res, 404, `No route ${req.method} ${req.url}`, 'invalid_request_error');
  if (record) fake.chatBodies.push(body);
  const created = Math.floor(Date.now() / 1000);
  const usage = { prompt_tokens: PROMPT_TOKENS, completion_tokens: COMPLETION_TOKENS, total_tokens: PROMPT_TOKENS + COMPLETION_TOKENS };
  if (body.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'chatcmpl-fake',
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: 'Hello world', refusal: null }, finish_reason: 'stop', logprobs: null }],
        usage,
      }),
    );
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
    id: 'chatcmpl-fake',
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
  });
  const events = [chunk({ role: 'assistant', content: 'Hello' }, null), chunk({ content: ' world' }, null), chunk({}, 'stop')];
  if (model === 'slow-stream') {
    res.write(`data: ${JSON.stringify(events[0])}\n\n`);
    res.on('close', () => fake.abandonedStreams++);
    return;
  }
  if (model === 'cut-stream') {
    res.write(`data: ${JSON.stringify(events[0])}\n\n`);
    res.write(`data: ${JSON.stringify(events[1])}\n\n`, () => setTimeout(() => res.destroy(), 20));
    return;
  }
  for (const event of events) res.write(`data: ${JSON.stringify(event)}\n\n`);
  if ((body.stream_options as { include_usage?: boolean } | undefined)?.include_usage) {
    res.write(`data: ${JSON.stringify({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created, model, choices: [], usage })}\n\n`);
  }
  res.end('data: [DONE]\n\n');
}
