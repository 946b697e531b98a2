import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { InputError } from '../../encoder/errors.ts';
import type { Predictor } from '../../encoder/predictor.ts';
import type { EmbedResult } from '../../encoder/schemas.ts';
import type { ServedModelNames } from '../model-names.ts';
import { binaryOf, float32Base64, ubinaryOf } from './embedding-encodings.ts';
import { HttpError } from './errors.ts';
import { fieldApiBodyParser, orNull } from './field-api-body.ts';
import { sendJson } from './json-reply.ts';
import { requireServedModel } from './model-name.ts';
import { requireEmbeddingModel } from './openai-embeddings.ts';

/**
 * Cohere's embed API: POST /v2/embed, what the `cohere-ai` client's `CohereClientV2.embed` calls, and POST /v1/embed
 * (`CohereClient.embed`), on embedding and sentence_embedding servers. Requests join the same batches as /predict.
 *
 * `embedding_types` float, base64 (little-endian float32 bytes, as OpenAI's), ubinary and binary (packed sign bits,
 * embedding-encodings.ts) are served. int8 and uint8 are refused (400 naming the served ones): their scale is not
 * defined for another model than Cohere's own, and numbers on a made-up scale would be silently incomparable with
 * Cohere's. `input_type` is accepted and ignored (an encoder without prompts embeds a query as a document);
 * `output_dimension` is OpenAI's `dimensions`; texts are truncated to the model's length at their end.
 */

const nonEmptyText = { type: 'string', minLength: 1 } as const;
const positiveInteger = { type: 'integer', minimum: 1 } as const;

export const SERVED_EMBEDDING_TYPES = ['float', 'base64', 'binary', 'ubinary'] as const;
type EmbeddingType = (typeof SERVED_EMBEDDING_TYPES)[number];

export const COHERE_EMBED_REQUEST_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    model: orNull({ type: 'string', description: 'Any name is taken as the served model, unless the server runs with --strict-model-name.' }),
    texts: orNull({ type: 'array', minItems: 1, items: nonEmptyText, description: 'The texts to embed (or inputs).' }),
    inputs: orNull({
      type: 'array',
      minItems: 1,
      description: "Cohere v2's inputs: each one's text parts, joined by newlines, are one text. Image parts are not served.",
      items: {
        type: 'object',
        required: ['content'],
        additionalProperties: false,
        properties: {
          content: {
            type: 'array',
            minItems: 1,
            items: { type: 'object', required: ['type', 'text'], additionalProperties: false, properties: { type: { type: 'string', enum: ['text'] }, text: nonEmptyText } },
          },
        },
      },
    }),
    images: orNull({ type: 'array', maxItems: 0, items: {}, description: 'Not served (this server embeds texts): an empty list or null only.' }),
    input_type: orNull({ type: 'string', description: 'Accepted and ignored (search_document, search_query, classification, clustering).' }),
    embedding_types: orNull({
      type: 'array',
      minItems: 1,
      items: { type: 'string', enum: [...SERVED_EMBEDDING_TYPES] },
      description: 'Any of float, base64, binary, ubinary; default float. int8 and uint8 are not served.',
    }),
    truncate: orNull({ type: 'string', enum: ['END', 'NONE'], description: "END (the default): texts are truncated at their end to the model's length; NONE is accepted but truncates too. START is not served." }),
    output_dimension: orNull({ ...positiveInteger, description: 'Keep the first n components, then scale to unit length (Matryoshka), as OpenAI\'s dimensions.' }),
    max_tokens: orNull({ ...positiveInteger, description: "Accepted and ignored: texts are truncated to the model's length." }),
    priority: orNull({ type: 'integer', description: 'Accepted and ignored: requests are batched in arrival order.' }),
  },
} as const;

interface CohereEmbedBody {
  model?: string;
  texts?: string[];
  inputs?: { content: { type: 'text'; text: string }[] }[];
  embedding_types?: EmbeddingType[];
  output_dimension?: number;
}

const parseEmbedBody = fieldApiBodyParser<CohereEmbedBody>(COHERE_EMBED_REQUEST_SCHEMA, {
  texts: (value) => {
    if (Array.isArray(value) && value.length > 0) {
      const bad = value.findIndex((text) => typeof text !== 'string' || text === '');
      return `'texts[${bad}]' must be a non-empty text, got ${JSON.stringify(value[bad])}`;
    }
    return "'texts' must be a non-empty list of texts";
  },
  inputs: (_value, error) => {
    const at = /^\/inputs\/(\d+)(?:\/content\/(\d+))?/.exec(error.instancePath);
    if (at?.[2] !== undefined) return `'inputs[${at[1]}].content[${at[2]}]' must be {"type": "text", "text": <a non-empty text>}: this server embeds texts only`;
    if (at) return `'inputs[${at[1]}]' must be {"content": [{"type": "text", "text": …}, …]}`;
    return "'inputs' must be a non-empty list of {\"content\": [{\"type\": \"text\", \"text\": …}]}";
  },
  images: () => "'images' is not supported: this server embeds texts; send texts",
  embedding_types: (value) => {
    const unserved = Array.isArray(value) ? value.find((type) => !(SERVED_EMBEDDING_TYPES as readonly unknown[]).includes(type)) : undefined;
    const served = SERVED_EMBEDDING_TYPES.join(', ');
    if (unserved === undefined) return `'embedding_types' must be a non-empty list of ${served}`;
    return `'embedding_types' ${JSON.stringify(unserved)} is not supported; supported: ${served}`;
  },
  truncate: (value) => `'truncate' ${JSON.stringify(value)} is not supported: texts are truncated at their end ('END'; 'NONE' is accepted)`,
  output_dimension: (value) => `'output_dimension' must be an integer of at least 1, got ${JSON.stringify(value)}`,
  max_tokens: (value) => `'max_tokens' must be an integer of at least 1, got ${JSON.stringify(value)}`,
});

export function registerCohereEmbedRoutes(app: FastifyInstance, predictor: Predictor, names: ServedModelNames): void {
  const route = (version: 1 | 2) => async (request: FastifyRequest, reply: FastifyReply) => {
    requireEmbeddingModel(predictor, `/v${version}/embed`);
    const body = parseEmbedBody(request.body);
    requireServedModel(names, body.model);
    const texts = textsOf(body);
    const result = await embed(predictor, texts, body.output_dimension);
    const meta = { api_version: { version: String(version) }, billed_units: { input_tokens: result.promptTokens } };
    if (version === 1 && body.embedding_types === undefined) {
      // Cohere v1 without embedding_types: the vectors themselves
      return sendJson(reply, { id: randomUUID(), embeddings: result.vectors, texts, meta, response_type: 'embeddings_floats' });
    }
    const types = body.embedding_types ?? ['float'];
    const embeddings = Object.fromEntries(types.map((type) => [type, result.vectors.map(ENCODERS[type])]));
    return sendJson(reply, { id: randomUUID(), embeddings, texts, meta, response_type: 'embeddings_by_type' });
  };
  app.post('/v1/embed', route(1));
  app.post('/v2/embed', route(2));
}

const ENCODERS: Record<EmbeddingType, (vector: Float32Array) => Float32Array | string | number[]> = {
  float: (vector) => vector,
  base64: float32Base64,
  binary: binaryOf,
  ubinary: ubinaryOf,
};

/** The texts to embed: `texts`, or each of `inputs` as its text parts joined by newlines; exactly one of the two. */
function textsOf(body: CohereEmbedBody): string[] {
  if (body.texts !== undefined && body.inputs !== undefined) {
    throw new HttpError(400, "'texts' and 'inputs' are alternatives: send one of them", { param: 'inputs' });
  }
  if (body.inputs !== undefined) return body.inputs.map((input) => input.content.map((part) => part.text).join('\n'));
  if (body.texts === undefined) throw new HttpError(400, "Missing required parameter: 'texts'", { param: 'texts' });
  return body.texts;
}

/** The predictor's embeddings; its word for the width is OpenAI's `dimensions`, which Cohere calls output_dimension. */
async function embed(predictor: Predictor, texts: string[], dimensions: number | undefined): Promise<EmbedResult> {
  try {
    return await predictor.embed({ inputs: texts, dimensions });
  } catch (error) {
    if (error instanceof InputError && error.field === 'dimensions') {
      throw new HttpError(400, error.reason.replace(/^dimensions\b/, "'output_dimension'"), { param: 'output_dimension' });
    }
    if (error instanceof InputError && error.field === 'input') throw new InputError(error.reason, { field: 'texts' });
    throw error;
  }
}
