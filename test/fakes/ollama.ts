// A fake of the Ollama server API on loopback: POST /api/chat (JSON, or NDJSON when stream is true or absent, as
// Ollama streams by default), POST /api/embed, GET /api/tags. Errors: {"error": "..."} with the HTTP status.

import { fakeVector, VendorServer, type Reply, type Route } from './vendor-server.ts';

export const ollamaError = (status: number, error: string, headers?: Record<string, string>): Reply => ({ status, headers, json: { error } });

export const OLLAMA_MODELS = ['llama3.2:latest', 'qwen3:8b', 'nomic-embed-text:latest'];

type Body = Record<string, unknown>;

function lastUserText(body: Body): string {
  return ((body.messages ?? []) as { role: string; content: string }[]).filter((m) => m.role === 'user').at(-1)?.content ?? '';
}

const timing = { total_duration: 5_000_000, load_duration: 1_000_000, prompt_eval_duration: 2_000_000, eval_duration: 2_000_000 };

export function fakeOllamaChat(body: Body) {
  return {
    model: body.model,
    created_at: '2026-11-22T00:00:00Z',
    message: { role: 'assistant', content: `echo: ${lastUserText(body)}` },
    done: true,
    done_reason: 'stop',
    prompt_eval_count: 26,
    eval_count: 7,
    ...timing,
  };
}

export function fakeOllamaChunks(body: Body): unknown[] {
  const text = `echo: ${lastUserText(body)}`;
  const pieces = text.match(/.{1,5}/gs) ?? [];
  return [
    ...pieces.map((piece) => ({ model: body.model, created_at: '2026-11-22T00:00:00Z', message: { role: 'assistant', content: piece }, done: false })),
    { model: body.model, created_at: '2026-11-22T00:00:01Z', message: { role: 'assistant', content: '' }, done: true, done_reason: 'stop', prompt_eval_count: 26, eval_count: 7, ...timing },
  ];
}

export async function startOllamaFake(): Promise<VendorServer> {
  const known = (model: unknown): Reply | null => (OLLAMA_MODELS.includes(String(model)) || OLLAMA_MODELS.includes(`${String(model)}:latest`) ? null : ollamaError(404, `model "${String(model)}" not found, try pulling it first`));
  const routes: Route[] = [
    {
      method: 'POST',
      path: /^\/api\/chat$/,
      handle(request) {
        const body = request.json as Body;
        const missing = known(body.model);
        if (missing) return missing;
        return body.stream === false ? { json: fakeOllamaChat(body) } : { ndjson: fakeOllamaChunks(body) };
      },
    },
    {
      method: 'POST',
      path: /^\/api\/embed$/,
      handle(request) {
        const body = request.json as { model: string; input: string | string[]; dimensions?: number };
        const missing = known(body.model);
        if (missing) return missing;
        const inputs = typeof body.input === 'string' ? [body.input] : body.input;
        return { json: { model: body.model, embeddings: inputs.map((text) => fakeVector(text, body.dimensions)), total_duration: 1000, load_duration: 100, prompt_eval_count: inputs.length * 3 } };
      },
    },
    {
      method: 'GET',
      path: /^\/api\/tags$/,
      handle: () => ({
        json: {
          models: OLLAMA_MODELS.map((name, i) => ({
            name,
            model: name,
            modified_at: `2026-11-0${i + 1}T10:00:00Z`,
            size: 2_000_000_000,
            digest: `sha256:${String(i).repeat(64)}`,
            details: { format: 'gguf', family: 'llama', families: ['llama'], parameter_size: '3B', quantization_level: 'Q4_K_M' },
          })),
        },
      }),
    },
  ];
  return VendorServer.start(routes);
}
