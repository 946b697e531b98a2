import { GatewayError } from '../errors.ts';
import type { EmbeddingResponse } from '../upstream.ts';

/**
 * A provider's embeddings answer, checked: one non-empty vector of numbers per input (Hub reads each vector by what
 * arrived, base64 float32s or numbers, whatever format was asked for). Anything else is the provider's fault: a 502
 * naming what came back (a model route tries its next target), never a 200 with empty or missing vectors.
 */
export function checkedEmbeddings(response: EmbeddingResponse, inputCount: number, provider: string): EmbeddingResponse {
  const broken = (reason: string) =>
    new GatewayError(502, 'upstream_error', 'upstream_invalid_response', `Provider ${provider}: invalid embeddings answer: ${reason}`);
  const data: unknown = (response as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) throw broken('no "data" list');
  if (data.length !== inputCount) throw broken(`${data.length} embedding(s) for ${inputCount} input(s)`);
  data.forEach((item: { embedding?: unknown } | null, i) => {
    const vector = item?.embedding;
    if (!Array.isArray(vector) || !vector.every((value) => typeof value === 'number' && Number.isFinite(value))) throw broken(`embedding ${i} is not a list of numbers`);
    if (vector.length === 0) throw broken(`embedding ${i} is empty`);
  });
  return response;
}

/** The answer in the format the client asked for: arrays of numbers, or base64 of little-endian float32s (OpenAI's). */
export function embeddingsReply(response: EmbeddingResponse, format: 'float' | 'base64'): EmbeddingResponse {
  if (format === 'float') return response;
  return {
    ...response,
    data: response.data.map((item) => ({ ...item, embedding: Buffer.from(new Float32Array(item.embedding).buffer).toString('base64') as unknown as number[] })),
  };
}
