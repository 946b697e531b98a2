// A fake of the Voyage AI embeddings API on loopback: POST /v1/embeddings. Errors: {detail: "..."}.

import { fakeVector, VendorServer, type Reply } from './vendor-server.ts';

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
  ]);
}
