/**
 * OpenAI's embeddings API for an image_embedding model: POST /v1/embeddings with each `input` an image in base64 or a
 * data URL (`data:image/png;base64,…`, as multimodal embedding APIs take images), `encoding_format` and `dimensions`
 * as for texts, and GET /v1/models. The response is OpenAI's (openai-embeddings.ts builds it), `usage` 0 tokens: an
 * image has none. Errors leave in OpenAI's shape, as every error under /v1 does.
 */
import type { FastifyInstance } from 'fastify';
import { InputError } from '../../encoder/errors.ts';
import type { ImagePipeline } from '../../encoder/image-pipeline.ts';
import { checkImageCount, imageBytesOf } from '../../encoder/image-requests.ts';
import type { ServedModelNames } from '../model-names.ts';
import { JSON_TYPE } from './errors.ts';
import { sendJson } from './json-reply.ts';
import { requireServedModel } from './model-name.ts';
import { embeddingsResponse, modelObject } from './openai-embeddings.ts';

const FIELDS = ['input', 'model', 'encoding_format', 'dimensions', 'user'];

export function registerImageEmbeddingRoutes(app: FastifyInstance, pipeline: ImagePipeline, names: ServedModelNames): void {
  app.get('/v1/models', (_request, reply) => reply.type(JSON_TYPE).send(JSON.stringify({ object: 'list', data: [modelObject(names)] })));
  app.get<{ Params: { model: string } }>('/v1/models/:model', (request, reply) => {
    requireServedModel(names, request.params.model);
    return reply.type(JSON_TYPE).send(JSON.stringify(modelObject(names)));
  });
  app.post('/v1/embeddings', async (request, reply) => {
    const body = request.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new InputError('request body must be a JSON object');
    const fields = body as Record<string, unknown>;
    const extra = Object.keys(fields).find((key) => !FIELDS.includes(key));
    if (extra !== undefined) throw new InputError(`unknown field '${extra}'`, { field: extra });
    const { input, model, encoding_format: format, dimensions } = fields;
    if (model !== undefined && model !== null && typeof model !== 'string') throw new InputError("'model' must be a string", { field: 'model' });
    requireServedModel(names, (model as string | null | undefined) ?? undefined);
    if (format !== undefined && format !== null && format !== 'float' && format !== 'base64') throw new InputError("'encoding_format' must be 'float' or 'base64'", { field: 'encoding_format' });
    if (dimensions !== undefined && dimensions !== null && !(Number.isInteger(dimensions) && (dimensions as number) >= 1)) {
      throw new InputError(`'dimensions' must be an integer of at least 1, got ${JSON.stringify(dimensions)}`, { field: 'dimensions' });
    }
    const inputs = typeof input === 'string' ? [input] : input;
    if (!Array.isArray(inputs) || !inputs.every((item) => typeof item === 'string')) {
      throw new InputError("'input' must be an image (base64 or a data URL) or a list of them", { field: 'input' });
    }
    checkImageCount(inputs.length, pipeline.maxRequestInputs, 'input');
    const images = inputs.map((item: string, index) => imageBytesOf(item, index, 'input'));
    const vectors = await pipeline.embedImages(images, { dimensions: (dimensions as number | null | undefined) ?? undefined, field: 'input' });
    return sendJson(reply, embeddingsResponse({ model_id: pipeline.modelId, vectors, promptTokens: 0 }, (format as 'float' | 'base64' | null | undefined) ?? 'float', names.served));
  });
}
