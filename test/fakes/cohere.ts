// A fake of the Cohere API on loopback: POST /v2/chat (JSON, and SSE with "event: <type>" + "data: {type, …}" from
// message-start to message-end), POST /v2/embed, POST /v2/rerank, GET /v1/models (paged by page_token). Errors: {id, message}.

import { fakeRanking, fakeVector, VendorServer, type RecordedRequest, type Reply, type Route } from './vendor-server.ts';

export const cohereError = (status: number, message: string, headers?: Record<string, string>): Reply => ({ status, headers, json: { id: 'err-fake', message } });

type Body = Record<string, unknown>;

function lastUserText(body: Body): string {
  const last = ((body.messages ?? []) as { role: string; content: unknown }[]).filter((m) => m.role === 'user').at(-1);
  if (!last) return '';
  if (typeof last.content === 'string') return last.content;
  return ((last.content as { type: string; text?: string }[]).find((c) => c.type === 'text')?.text ?? '').toString();
}

const usage = { billed_units: { input_tokens: 20, output_tokens: 6 }, tokens: { input_tokens: 120, output_tokens: 6 }, cached_tokens: 100 };

export function fakeCohereChat(body: Body) {
  return {
    id: 'chat-fake-1',
    finish_reason: 'COMPLETE',
    message: { role: 'assistant', content: [{ type: 'text', text: `echo: ${lastUserText(body)}` }] },
    usage,
  };
}

export function fakeCohereEvents(body: Body): { event: string; data: unknown }[] {
  const text = `echo: ${lastUserText(body)}`;
  const pieces = text.match(/.{1,5}/gs) ?? [];
  const event = (type: string, data: object) => ({ event: type, data: { type, ...data } });
  return [
    event('message-start', { id: 'chat-fake-1', delta: { message: { role: 'assistant', content: [], tool_plan: '', tool_calls: [], citations: [] } } }),
    event('content-start', { index: 0, delta: { message: { content: { type: 'text', text: '' } } } }),
    ...pieces.map((piece) => event('content-delta', { index: 0, delta: { message: { content: { text: piece } } } })),
    event('content-end', { index: 0 }),
    event('message-end', { delta: { finish_reason: 'COMPLETE', usage } }),
  ];
}

const MODELS = ['command-a-03-2025', 'command-r7b-12-2024', 'embed-v4.0'];

export async function startCohereFake(): Promise<VendorServer> {
  const authorised = (request: RecordedRequest): Reply | null => {
    const auth = request.headers.authorization;
    if (!auth) return cohereError(401, 'no api key supplied');
    return auth === 'Bearer bad-key' ? cohereError(401, 'invalid api token') : null;
  };
  const routes: Route[] = [
    {
      method: 'POST',
      path: /^\/v2\/chat$/,
      handle(request) {
        const denied = authorised(request);
        if (denied) return denied;
        const body = request.json as Body;
        if (!body?.model) return cohereError(400, 'invalid request: model must be specified');
        return body.stream ? { sse: fakeCohereEvents(body) } : { json: fakeCohereChat(body) };
      },
    },
    {
      method: 'POST',
      path: /^\/v2\/embed$/,
      handle(request) {
        const denied = authorised(request);
        if (denied) return denied;
        const body = request.json as { texts: string[]; input_type?: string; output_dimension?: number };
        if (!body.input_type) return cohereError(400, 'invalid request: input_type is required for embed v2');
        if (body.texts.length > 96) return cohereError(400, `invalid request: total number of texts must be at most 96 - received ${body.texts.length}`);
        const tokens = body.texts.reduce((n, text) => n + text.split(/\s+/).length, 0);
        return {
          json: {
            id: 'embed-fake',
            response_type: 'embeddings_by_type',
            embeddings: { float: body.texts.map((text) => fakeVector(text, body.output_dimension)) },
            texts: body.texts,
            meta: { api_version: { version: '2' }, billed_units: { input_tokens: tokens } },
          },
        };
      },
    },
    {
      method: 'POST',
      path: /^\/v2\/rerank$/,
      handle(request) {
        const denied = authorised(request);
        if (denied) return denied;
        const body = request.json as { model?: string; query?: string; documents?: unknown[]; top_n?: number };
        if (!body.model) return cohereError(400, 'invalid request: model must be specified');
        if (!Array.isArray(body.documents) || body.documents.some((document) => typeof document !== 'string')) {
          return cohereError(400, 'invalid request: documents must be a list of strings');
        }
        const documents = body.documents as string[];
        // one search unit per query and (up to) 100 documents, as Cohere bills
        const searchUnits = Math.ceil(documents.length / 100);
        return {
          json: {
            id: 'rerank-fake',
            results: fakeRanking(body.query ?? '', documents, body.top_n),
            meta: { api_version: { version: '2' }, billed_units: { search_units: searchUnits } },
          },
        };
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/models$/,
      handle(request) {
        const denied = authorised(request);
        if (denied) return denied;
        // the fake pages by 2 whatever page_size asks, so paging is always exercised
        const start = Number(request.query.get('page_token') ?? 0);
        const models = MODELS.slice(start, start + 2).map((name) => ({ name, endpoints: name.startsWith('embed') ? ['embed'] : ['chat'], finetuned: false, context_length: 128000 }));
        return { json: { models, ...(start + 2 < MODELS.length ? { next_page_token: String(start + 2) } : {}) } };
      },
    },
  ];
  return VendorServer.start(routes);
}
