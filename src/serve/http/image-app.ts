/**
 * The HTTP front end of an image classification model: GET /health, /livez, /model, POST /predict (JSON, images in
 * base64 or data URLs), POST /predict/multipart as mozilla-ai/encoderfile 0.7 has it (a JSON part `payload`, the
 * images as parts `files`), one image's bytes on POST / and /invocations (DEFAULT_ROUTES), MCP at /mcp
 * (image-mcp.ts), plus /metrics given metrics. Errors are text/plain as on every route: an image that is
 * empty, corrupt, truncated, too large or not an image is a 422 naming it (`files[i]`, `inputs[i]`), a body that is
 * not multipart as it should be a 400. docs/image-models.md, docs/http-api.md.
 */
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InputError, isEncoderError } from '../../encoder/errors.ts';
import type { ImagePipeline } from '../../encoder/image-pipeline.ts';
import { IMAGE_REQUEST_OPTIONS, imageRequestOptions, type ImageRequest } from '../../encoder/image-requests.ts';
import { createHttpShell, finishHttpApp, once, type HttpAppOptions } from './app.ts';
import { registerMcpRoute } from './mcp-route.ts';
import { registerImageEmbeddingRoutes } from './image-embeddings.ts';
import { ServedModelNames } from '../model-names.ts';
import { bodyTooLargeMessage, HttpError, JSON_TYPE } from './errors.ts';
import { sendJson } from './json-reply.ts';
import { DEFAULT_ROUTES, registerHealthRoutes } from './routes.ts';

export const MULTIPART_PREDICT_PATH = '/predict/multipart';
/**
 * The body types of one image's bytes on the default routes (routes.ts, DEFAULT_ROUTES): any image type (the decoder
 * tells them apart), or plain octets.
 */
const RAW_IMAGE_TYPES = /^(image\/[\w.+-]+|application\/octet-stream)\s*(;|$)/i;
/** The part names of encoderfile's form. */
const PAYLOAD_PART = 'payload';
const FILES_PART = 'files';

export interface ImageHttpOptions extends HttpAppOptions {
  /** Most images in one request (the pipeline's limit too). */
  maxRequestInputs: number;
  /** Bytes of one encoded image (the decoder's limit too). */
  maxImageBytes: number;
}

export async function createImageHttpApp(pipeline: ImagePipeline, options: ImageHttpOptions): Promise<FastifyInstance> {
  const app = createHttpShell(options);
  registerHealthRoutes(app, () => pipeline.metadata());
  const openApiJson = once(async () => {
    const { imageOpenApiDocument } = await import('./openapi-image.ts');
    const { bodyLimitBytes, maxImageBytes, maxRequestInputs } = options;
    const document = imageOpenApiDocument({ metadata: pipeline.metadata(), serverInfo: options.serverInfo, bodyLimitBytes, maxImageBytes, maxRequestInputs, metrics: options.metrics !== undefined, apiKey: options.apiKey !== undefined });
    return JSON.stringify(document);
  });
  app.get('/openapi.json', async (_request, reply) => reply.type(JSON_TYPE).send(await openApiJson()));
  app.post('/predict', async (request, reply) => sendJson(reply, await pipeline.predict(request.body)));
  if (pipeline.modelType === 'image_embedding') registerImageEmbeddingRoutes(app, pipeline, options.modelNames ?? new ServedModelNames(pipeline.modelId));
  if (pipeline.modelType === 'image_classification') await registerRawImageRoutes(app, pipeline, options);
  // the SDK loads at the first MCP request, as for text models
  registerMcpRoute(
    app,
    once(async () => {
      const [{ McpServerFactory }, { imageToolModel }] = await Promise.all([import('./mcp-server.ts'), import('./image-mcp.ts')]);
      return new McpServerFactory(imageToolModel(pipeline), options.serverInfo);
    }),
  );
  // the multipart parser only where the form is read: /predict stays JSON-only (a form there is a 415)
  await app.register(async (scope) => {
    await scope.register(multipart, {
      limits: { files: options.maxRequestInputs, fileSize: options.maxImageBytes, fieldSize: options.bodyLimitBytes, parts: options.maxRequestInputs + 16 },
    });
    scope.post(MULTIPART_PREDICT_PATH, async (request, reply) => sendJson(reply, await pipeline.predictImages(await readForm(request, options, pipeline.modelType), FILES_PART)));
  });
  return finishHttpApp(app, options);
}

/** One image's bytes as the body, answered as the Hugging Face image classification task answers: its labels, best first. */
async function registerRawImageRoutes(app: FastifyInstance, pipeline: ImagePipeline, options: ImageHttpOptions): Promise<void> {
  await app.register(async (scope) => {
    scope.addContentTypeParser(RAW_IMAGE_TYPES, { parseAs: 'buffer', bodyLimit: options.maxImageBytes }, (_request, body, done) => done(null, body));
    for (const path of DEFAULT_ROUTES) {
      scope.post(path, async (request, reply) => {
        if (!Buffer.isBuffer(request.body)) {
          throw new HttpError(415, "Unsupported Media Type: send one image's bytes as the body, with its type (Content-Type: image/png, image/jpeg, …)");
        }
        const { results } = await pipeline.predictImages({ images: [request.body] }, 'image');
        return sendJson(reply, (results[0] as { labels: unknown }).labels);
      });
    }
  });
}

/**
 * The form's images and payload. The payload is required, as encoderfile requires it; it holds this server's
 * `top_k` and `metadata`, or, as encoderfile reads it, a flat object of strings that is the metadata. Parts of other
 * names are skipped, as encoderfile skips them.
 */
async function readForm(request: FastifyRequest, options: ImageHttpOptions, modelType: string): Promise<ImageRequest> {
  let payload: unknown;
  let hasPayload = false;
  const images: Uint8Array[] = [];
  let bytes = 0;
  try {
    for await (const part of request.parts()) {
      const data = part.type === 'file' ? await part.toBuffer() : Buffer.from(String(part.value));
      bytes += data.length;
      if (bytes > options.bodyLimitBytes) throw new HttpError(413, bodyTooLargeMessage(options.bodyLimitBytes));
      if (part.fieldname === FILES_PART) {
        if (part.type !== 'file') throw new InputError(`${FILES_PART}[${images.length}]: send each image as a file part (a filename in its Content-Disposition)`, { field: FILES_PART });
        images.push(data);
      } else if (part.fieldname === PAYLOAD_PART) {
        hasPayload = true;
        try {
          payload = JSON.parse(data.toString('utf8'));
        } catch (error) {
          throw new InputError(`the "${PAYLOAD_PART}" part is not valid JSON: ${(error as Error).message}`, { field: PAYLOAD_PART });
        }
      }
    }
  } catch (error) {
    throw formError(error, options);
  }
  if (!hasPayload) throw new InputError(`missing required multipart field "${PAYLOAD_PART}" (a JSON object; {} for none)`, { field: PAYLOAD_PART });
  if (images.length === 0) throw new InputError(`no images: send each image as a file part named "${FILES_PART}"`, { field: FILES_PART });
  return { images, ...payloadOptions(payload, modelType) };
}

/** `{top_k?, normalize?, metadata?}` as the model type takes them, or encoderfile's flat object of strings (the metadata). */
function payloadOptions(payload: unknown, modelType: string): Pick<ImageRequest, 'topK' | 'normalize' | 'metadata'> {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) throw new InputError(`the "${PAYLOAD_PART}" part must be a JSON object`, { field: PAYLOAD_PART });
  const entries = Object.entries(payload);
  const options = IMAGE_REQUEST_OPTIONS[modelType] ?? [];
  if (entries.every(([key]) => options.includes(key))) return imageRequestOptions(payload as Record<string, unknown>, modelType);
  if (entries.every(([, value]) => typeof value === 'string')) return { metadata: payload as Record<string, string> };
  throw new InputError(`the "${PAYLOAD_PART}" part holds ${options.join(' and ')}, or an object of strings (the metadata)`, { field: PAYLOAD_PART });
}

/** What went wrong reading the form, as the client should read it: its own errors kept, the parser's a 400 or 413. */
function formError(error: unknown, options: ImageHttpOptions): unknown {
  if (isEncoderError(error) || error instanceof HttpError) return error;
  const code = (error as { code?: string }).code;
  if (code === 'FST_REQ_FILE_TOO_LARGE') return new InputError(`${FILES_PART}: an image is more than the limit of ${options.maxImageBytes} bytes`, { field: FILES_PART });
  if (code === 'FST_FILES_LIMIT') return new InputError(`the request holds more than the limit of ${options.maxRequestInputs} images per request; send fewer images per request`, { field: FILES_PART });
  const status = (error as { statusCode?: number }).statusCode;
  const reason = error instanceof Error ? error.message : String(error);
  return new HttpError(status === 406 || status === 415 ? 415 : 400, `Bad Request: the multipart/form-data body could not be read (${reason})`);
}
