import { GatewayError } from '../errors.ts';
import type { EmbeddingResponse } from '../upstream.ts';

/**
 * A provider's embeddings answer, checked and with every vector as numbers, read by what arrived: an array of numbers
 * is kept, a string is base64 of little-endian float32s (what OpenAI sends for `encoding_format: "base64"`), whatever
 * format was asked for. Not one non-empty vector per input is the provider's fault: a 502 naming what came back (a
 * model route tries its next target), never a 200 with empty or missing vectors.
 */
export function checkedEmbeddings(response: EmbeddingResponse, inputCount: number, provider: string): EmbeddingResponse {
  const broken = (reason: string) =>
    new GatewayError(502, 'upstream_error', 'upstream_invalid_response', `Provider ${provider}: invalid embeddings answer: ${reason}`);
  const data = (response as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) throw broken('no "data" list');
  if (data.length !== inputCount) throw broken(`${data.length} embedding(s) for ${inputCount} input(s)`);
  const vectors = data.map((item: { embedding?: unknown } | null, i) => {
    const vector = vectorOf(item?.embedding);
    if (vector === null) throw broken(`embedding ${i} is neither a list of numbers nor base64 float32s`);
    if (vector.length === 0) throw broken(`embedding ${i} is empty`);
    return vector;
  });
  return { ...response, data: data.map((item, i) => ({ ...item, embedding: vectors[i] })) };
}

function vectorOf(embedding: unknown): number[] | null {
  if (Array.isArray(embedding)) return embedding.every((value) => typeof value === 'number' && Number.isFinite(value)) ? embedding : null;
  if (typeof embedding !== 'string') return null;
  const bytes = Buffer.from(embedding, 'base64');
  if (bytes.length % 4 !== 0) return null;
  const vector = new Array<number>(bytes.length / 4);
  for (let i = 0; i < vector.length; i++) vector[i] = bytes.readFloatLE(i * 4);
  return vector;
}

/** The answer in the format the client asked for: arrays of numbers, or base64 of little-endian float32s (OpenAI's). */
export function embeddingsReply(response: EmbeddingResponse, format: 'float' | 'base64'): EmbeddingResponse {
  if (format === 'float') return response;
  return {
    ...response,
    data: response.data.map((item) => ({ ...item, embedding: Buffer.from(new Float32Array(item.embedding).buffer).toString('base64') as unknown as number[] })),
  };
}
