// A fake of IBM watsonx.ai on loopback, with IBM IAM's token endpoint on the same server:
//   POST /identity/token (form: grant_type=urn:ibm:params:oauth:grant-type:apikey, apikey) → {access_token, expires_in, …};
//        an unknown key → 400 {errorCode: "BXNIM0415E", errorMessage}
//   POST /ml/v1/text/chat, /ml/v1/text/chat_stream (SSE `event: message` chunks, usage on the last) — a `version`
//        query, a bearer token the fake issued and has not revoked, model_id, and project_id or space_id are required
//   GET  /ml/v1/foundation_model_specs?version&limit&start — paged through next.href
// Errors are watsonx's: {errors: [{code, message, more_info}], trace, status_code}.

import { VendorServer, type RecordedRequest, type Reply, type Route } from './vendor-server.ts';

export const WATSONX_KEY = 'watsonx-good-key';
export const WATSONX_PROJECT = 'proj-1234';
export const WATSONX_MODELS = ['ibm/granite-3-8b-instruct', 'meta-llama/llama-3-3-70b-instruct', 'mistralai/mistral-large'];

export const watsonxError = (status: number, code: string, message: string, headers?: Record<string, string>): Reply => ({
  status,
  ...(headers ? { headers } : {}),
  json: { errors: [{ code, message, more_info: 'https://cloud.ibm.com/apidocs/watsonx-ai' }], trace: 'trace-1', status_code: status },
});

type Chat = { model_id: string; messages: { role: string; content: unknown }[] };

function lastUserText(body: Chat): string {
  const content = body.messages.filter((message) => message.role === 'user').at(-1)?.content;
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? (content as { type: string; text?: string }[]).filter((part) => part.type === 'text').map((part) => part.text).join(' ') : '';
}

export const WATSONX_USAGE = { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 };

export function watsonxAnswer(body: Chat) {
  return {
    id: 'chat-wx-1',
    object: 'chat.completion',
    model_id: body.model_id,
    model: body.model_id,
    created: 1_750_000_000,
    created_at: '2025-06-15T00:00:00.000Z',
    choices: [{ index: 0, message: { role: 'assistant', content: `echo: ${lastUserText(body)}` }, finish_reason: 'stop' }],
    usage: WATSONX_USAGE,
  };
}

/** The echo as stream chunks: the role, 5-character deltas, the finish reason, then usage (as watsonx streams it). */
export function watsonxChunks(body: Chat): unknown[] {
  const base = { id: 'chat-wx-s', object: 'chat.completion.chunk', model_id: body.model_id, model: body.model_id, created: 1_750_000_000 };
  const pieces = `echo: ${lastUserText(body)}`.match(/.{1,5}/gs) ?? [];
  return [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
    ...pieces.map((content) => ({ ...base, choices: [{ index: 0, delta: { content }, finish_reason: null }] })),
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: WATSONX_USAGE },
  ];
}

export const watsonxStream = (chunks: unknown[], options: { cutAfter?: number; endEarly?: number; holdAfter?: number } = {}): Reply => ({
  sse: chunks.map((data) => ({ event: 'message', data })),
  ...options,
});

export class WatsonxFake {
  readonly server: VendorServer;
  /** Seconds each issued token lives (expires_in). */
  tokenLifetime = 3600;
  /** Tokens issued and still accepted. */
  readonly valid = new Set<string>();
  private issued = 0;

  private constructor(server: VendorServer) {
    this.server = server;
  }

  get url(): string {
    return this.server.url;
  }
  get iamUrl(): string {
    return `${this.server.url}/identity/token`;
  }
  /** The requests for tokens, and the others. */
  get tokenRequests(): RecordedRequest[] {
    return this.server.requests.filter((request) => request.path === '/identity/token');
  }
  get apiRequests(): RecordedRequest[] {
    return this.server.requests.filter((request) => request.path !== '/identity/token');
  }
  /** Refuses every token issued so far (as an expired or revoked token is refused). */
  revokeAll(): void {
    this.valid.clear();
  }
  reset(): void {
    this.server.reset();
    this.tokenLifetime = 3600;
  }
  close(): Promise<void> {
    return this.server.close();
  }

  static async start(): Promise<WatsonxFake> {
    // the routes read the fake's state; it exists once the server has started
    const holder: { fake?: WatsonxFake } = {};
    const guard = (request: RecordedRequest, needsScope: boolean): Reply | null => {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(request.query.get('version') ?? '')) return watsonxError(400, 'invalid_request_parameter', "Missing or invalid query parameter 'version'");
      const token = /^Bearer (.+)$/.exec(String(request.headers.authorization ?? ''))?.[1];
      if (!token || !holder.fake!.valid.has(token)) return watsonxError(401, 'authentication_token_expired', 'Failed to authenticate the request due to an expired token');
      if (!needsScope) return null;
      const body = request.json as Record<string, unknown> | undefined;
      if (!body?.project_id && !body?.space_id) return watsonxError(400, 'json_validation_error', 'Either project_id or space_id must be specified');
      if (!WATSONX_MODELS.includes(String(body.model_id))) return watsonxError(404, 'model_not_supported', `Model '${String(body.model_id)}' is not supported`);
      return null;
    };
    const routes: Route[] = [
      {
        method: 'POST',
        path: /^\/identity\/token$/,
        handle(request) {
          const form = new URLSearchParams(request.body.toString('utf8'));
          if (String(request.headers['content-type']).split(';')[0] !== 'application/x-www-form-urlencoded' || form.get('grant_type') !== 'urn:ibm:params:oauth:grant-type:apikey') {
            return { status: 400, json: { errorCode: 'BXNIM0109E', errorMessage: 'Property missing or empty.' } };
          }
          if (form.get('apikey') !== WATSONX_KEY) return { status: 400, json: { errorCode: 'BXNIM0415E', errorMessage: 'Provided API key could not be found.' } };
          const token = `wx-token-${++holder.fake!.issued}`;
          holder.fake!.valid.add(token);
          const now = Math.floor(Date.now() / 1000);
          return { json: { access_token: token, refresh_token: 'not_supported', token_type: 'Bearer', expires_in: holder.fake!.tokenLifetime, expiration: now + holder.fake!.tokenLifetime, scope: 'ibm openid' } };
        },
      },
      {
        method: 'POST',
        path: /^\/ml\/v1\/text\/chat$/,
        handle: (request) => guard(request, true) ?? { json: watsonxAnswer(request.json as Chat) },
      },
      {
        method: 'POST',
        path: /^\/ml\/v1\/text\/chat_stream$/,
        handle: (request) => guard(request, true) ?? watsonxStream(watsonxChunks(request.json as Chat)),
      },
      {
        method: 'GET',
        path: /^\/ml\/v1\/foundation_model_specs$/,
        handle(request) {
          const denied = guard(request, false);
          if (denied) return denied;
          // two pages: the first model, then the rest
          const start = request.query.get('start');
          const resources = (start === 'page2' ? WATSONX_MODELS.slice(1) : WATSONX_MODELS.slice(0, 1)).map((model_id) => ({ model_id, label: model_id, provider: model_id.split('/')[0] }));
          return {
            json: {
              total_count: WATSONX_MODELS.length,
              limit: Number(request.query.get('limit')),
              first: { href: `${holder.fake!.url}/ml/v1/foundation_model_specs?limit=200` },
              ...(start === 'page2' ? {} : { next: { href: `${holder.fake!.url}/ml/v1/foundation_model_specs?limit=200&start=page2` } }),
              resources,
            },
          };
        },
      },
    ];
    holder.fake = new WatsonxFake(await VendorServer.start(routes));
    return holder.fake;
  }
}
