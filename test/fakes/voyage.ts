// A fake of the Voyage AI API on loopback: POST /v1/embeddings, POST /v1/rerank. Errors: {detail: "..."}.

import { fakeRanking, fakeVector, VendorServer, type Reply } from './vendor-server.ts';

export const voyageError = (status: number, detail: string, headers?: Record<string, string>): Reply => ({ status, headers, json: { detail } });

export async function startVoyageFake(): Promise<VendorServer> {
  return VendorServer.start([
    {
      method: 'POST',
      path: /^\/v1\/embeddings$/,
      handle(request) {
        if (request.headers.authorization !== 'Bearer vo-key') return voyageError(401, 'Provided API key is invalid.');
        const body = request.json as { input: string | string[]; model: string; input_type?: string; output_dimension?: number };
        const inputs = typeof body.input === 'string' ? [body.input] : body.input;
        if (!['voyage-3.5', 'voyage-3-large'].includes(body.model)) return voyageError(400, `Model ${body.model} is not supported.`);
        const tokens = inputs.reduce((n, text) => n + text.split(/\s+/).length, 0);
        return {
          json: {
            object: 'list',
            data: inputs.map((text, index) => ({ object: 'embedding', embedding: fakeVector(text, body.output_dimension), index })),
            model: body.model,
            usage: { total_tokens: tokens },
          },
        };
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/rerank$/,
      handle(request) {
        if (request.headers.authorization !== 'Bearer vo-key') return voyageError(401, 'Provided API key is invalid.');
        const body = request.json as { query: string; documents: string[]; model: string; top_k?: number };
        if (!['rerank-2.5', 'rerank-2.5-lite'].includes(body.model)) return voyageError(400, `Model ${body.model} is not supported.`);
        const tokens = [body.query, ...body.documents].reduce((n, text) => n + text.split(/\s+/).length, 0) * body.documents.length;
        return { json: { object: 'list', data: fakeRanking(body.query, body.documents, body.top_k), model: body.model, usage: { total_tokens: tokens } } };
      },
    },
  ]);
}
