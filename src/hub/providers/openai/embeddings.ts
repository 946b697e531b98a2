import type OpenAI from 'openai';

/**
 * An embeddings answer with every vector as numbers, whatever the server sent: a base64 string is read as
 * little-endian float32s (what OpenAI sends for `encoding_format: "base64"`), an array is kept. The SDK is always
 * given an `encoding_format`, so it returns the answer as it came: unless told, it asks for base64 and decodes every
 * vector as base64, and a server that ignores the field and answers arrays gave garbage (empty) vectors.
 */
export function embeddingsAsFloats(response: OpenAI.CreateEmbeddingResponse): OpenAI.CreateEmbeddingResponse {
  if (!Array.isArray(response?.data)) return response;
  for (const item of response.data) {
    const embedding = item?.embedding as unknown;
    if (typeof embedding === 'string') item.embedding = float32sOf(embedding);
  }
  return response;
}

/** Base64 of little-endian float32s as numbers (each the float32 value itself); trailing bytes short of a float are dropped. */
function float32sOf(base64: string): number[] {
  const bytes = Buffer.from(base64, 'base64');
  const floats = new Array<number>(Math.floor(bytes.length / 4));
  for (let i = 0; i < floats.length; i++) floats[i] = bytes.readFloatLE(i * 4);
  return floats;
}
