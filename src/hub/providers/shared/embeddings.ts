// Pieces the embedding providers share: the OpenAI-shaped answer, base64 float32 vectors, input chunking, the output
// dimension under the vendor's field, and the refusal of `messages` by services that serve embeddings only.

import { InvalidRequestError, UnsupportedParameterError } from '../../errors.ts';
import type { EmbeddingParams, EmbeddingResponse, Provider } from '../../provider.ts';

/**
 * The request field asking for `params.dimensions` under the vendor's own name (`{}` when not given). A caller who
 * also set the vendor's own option (any of `ownNames`, e.g. Voyage's output_dimension as an extra option) gets an
 * InvalidRequestError: one of the two would be ignored.
 */
export function outputDimension(
  params: EmbeddingParams,
  extra: Record<string, unknown>,
  field: string,
  ownNames: readonly string[],
  provider: string,
): Record<string, number> {
  if (params.dimensions === undefined) return {};
  const doubled = ownNames.find((name) => extra[name] !== undefined);
  if (doubled) {
    throw new InvalidRequestError(`Give dimensions or ${doubled}, not both (${provider} takes dimensions as ${doubled})`, null, provider, { param: 'dimensions' });
  }
  return { [field]: params.dimensions };
}

/** The OpenAI CreateEmbeddingResponse for vectors in input order (vendors without token counts report 0). */
export function embeddingList(model: string, vectors: readonly number[][], tokens: number): EmbeddingResponse {
  return {
    object: 'list',
    model,
    data: vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })),
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}

/**
 * A base64 vector of little-endian float32s (OpenAI's `encoding_format: "base64"`) as numbers, each the float32 value
 * itself, read without rounding; null when its length is not whole float32s.
 */
export function float32sOfBase64(base64: string): number[] | null {
  const bytes = Buffer.from(base64, 'base64');
  if (bytes.length % 4 !== 0) return null;
  const floats = new Array<number>(bytes.length / 4);
  for (let i = 0; i < floats.length; i++) floats[i] = bytes.readFloatLE(i * 4);
  return floats;
}

/** Splits embedding inputs into the vendor's largest request (Cohere: 96 texts, Gemini: 100 requests). */
export function inChunks<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  return chunks;
}

/** messages and messagesStream of an embeddings-only service: both raise UnsupportedParameterError('messages'). */
export function embeddingsOnly(provider: string, reason: string): Pick<Provider, 'messages' | 'messagesStream'> {
  const unsupported = (): never => {
    throw new UnsupportedParameterError('messages', provider, reason);
  };
  return {
    messages: async () => unsupported(),
    // eslint-disable-next-line require-yield
    messagesStream: async function* () {
      unsupported();
    },
  };
}
