// A fake of the Gemini API (generativelanguage.googleapis.com, v1beta) on loopback: generateContent,
// streamGenerateContent?alt=sse, batchEmbedContents/embedContent (vectors as long as outputDimensionality asks),
// models (paged by pageToken).
// Errors are Google's {error: {code, message, status, details}}; an invalid key is a 400 with reason API_KEY_INVALID.

import { fakeVector, VendorServer, type RecordedRequest, type Reply, type Route } from './vendor-server.ts';

export const GEMINI_MODELS = ['gemini-2.5-flash', 'gemini-2.5-pro', 'text-embedding-004'];

export const googleError = (code: number, status: string, message: string, details: unknown[] = []): Reply => ({
  status: code,
  json: { error: { code, message, status, details } },
});

function lastUserText(body: Record<string, unknown>): string {
  const contents = (body.contents ?? []) as { role: string; parts: { text?: string }[] }[];
  return contents.at(-1)?.parts.find((p) => p.text !== undefined)?.text ?? '';
}

export function fakeGeminiResponse(body: Record<string, unknown>) {
  return {
    candidates: [{ content: { role: 'model', parts: [{ text: `echo: ${lastUserText(body)}` }] }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 4, totalTokenCount: 16, cachedContentTokenCount: 2 },
    modelVersion: 'gemini-2.5-flash-001',
    responseId: 'resp-fake-1',
  };
}

/** The reply split into SSE chunks the way the API streams it (usage on the last chunk). */
export function fakeGeminiChunks(body: Record<string, unknown>): { data: unknown }[] {
  const text = `echo: ${lastUserText(body)}`;
  const pieces = text.match(/.{1,5}/gs) ?? [];
  return pieces.map((piece, i) => {
    const last = i === pieces.length - 1;
    return {
      data: {
        candidates: [{ content: { role: 'model', parts: [{ text: piece }] }, index: 0, ...(last ? { finishReason: 'STOP' } : {}) }],
        usageMetadata: last ? { promptTokenCount: 12, candidatesTokenCount: 4, totalTokenCount: 16 } : { promptTokenCount: 12, totalTokenCount: 12 },
        modelVersion: 'gemini-2.5-flash-001',
        responseId: 'resp-fake-1',
      },
    };
  });
}

export { fakeVector } from './vendor-server.ts';

export async function startGeminiFake(): Promise<VendorServer> {
  const authorised = (request: RecordedRequest): Reply | null => {
    const key = request.headers['x-goog-api-key'] ?? request.query.get('key');
    if (!key) return googleError(403, 'PERMISSION_DENIED', 'Method doesn\'t allow unregistered callers (callers without established identity).');
    if (key === 'bad-key') {
      return googleError(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', [
        { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' },
      ]);
    }
    return null;
  };
  const routes: Route[] = [
    {
      method: 'POST',
      path: /^\/v1beta\/models\/([^/:]+):generateContent$/,
      handle: (request) => authorised(request) ?? { json: fakeGeminiResponse(request.json as Record<string, unknown>) },
    },
    {
      method: 'POST',
      path: /^\/v1beta\/models\/([^/:]+):streamGenerateContent$/,
      handle(request) {
        if (request.query.get('alt') !== 'sse') return googleError(400, 'INVALID_ARGUMENT', 'only alt=sse is faked');
        return authorised(request) ?? { sse: fakeGeminiChunks(request.json as Record<string, unknown>) };
      },
    },
    {
      method: 'POST',
      path: /^\/v1beta\/models\/([^/:]+):batchEmbedContents$/,
      handle(request) {
        const denied = authorised(request);
        if (denied) return denied;
        const requests = (request.json as { requests: { content: { parts: { text: string }[] }; outputDimensionality?: number }[] }).requests;
        if (requests.length > 100) return googleError(400, 'INVALID_ARGUMENT', '* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch');
        return { json: { embeddings: requests.map((r) => ({ values: fakeVector(r.content.parts.map((p) => p.text).join(''), r.outputDimensionality) })) } };
      },
    },
    {
      method: 'POST',
      path: /^\/v1beta\/models\/([^/:]+):embedContent$/,
      handle(request) {
        const denied = authorised(request);
        if (denied) return denied;
        const content = (request.json as { content: { parts: { text: string }[] } }).content;
        return { json: { embedding: { values: fakeVector(content.parts.map((p) => p.text).join('')) } } };
      },
    },
    {
      method: 'GET',
      path: /^\/v1beta\/models$/,
      handle(request) {
        const size = Number(request.query.get('pageSize') ?? 2);
        const start = Number(request.query.get('pageToken') ?? 0);
        const models = GEMINI_MODELS.slice(start, start + size).map((id) => ({
          name: `models/${id}`,
          displayName: id,
          supportedGenerationMethods: id.startsWith('text-embedding') ? ['embedContent'] : ['generateContent', 'countTokens'],
        }));
        return { json: { models, ...(start + size < GEMINI_MODELS.length ? { nextPageToken: String(start + size) } : {}) } };
      },
    },
  ];
  return VendorServer.start(routes);
}
