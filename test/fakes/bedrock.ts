// A fake of Amazon Bedrock on loopback: the runtime's Converse (/model/{id}/converse), ConverseStream
// (/model/{id}/converse-stream, application/vnd.amazon.eventstream frames encoded with @smithy/eventstream-codec)
// and InvokeModel for Titan and Cohere embedding models (/model/{id}/invoke), and the control plane's
// ListFoundationModels (/foundation-models).
// Every request must be signed (Authorization: AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/bedrock/aws4_request,
// SignedHeaders=…, Signature=<64 hex>) or carry a Bedrock API key (Authorization: Bearer …); errors are AWS's
// restJson errors: a status, the x-amzn-errortype header and {message}.

import { EventStreamCodec, type MessageHeaders } from '@smithy/eventstream-codec';
import { fakeVector, VendorServer, type RecordedRequest, type Reply, type Route } from './vendor-server.ts';

export const BEDROCK_MODELS = [
  { modelId: 'anthropic.claude-3-5-haiku-20241022-v1:0', providerName: 'Anthropic' },
  { modelId: 'amazon.titan-embed-text-v2:0', providerName: 'Amazon' },
  { modelId: 'cohere.embed-english-v3', providerName: 'Cohere' },
];
export const TEST_ACCESS_KEY_ID = 'AKIDFAKEBEDROCKTEST';
export const BAD_BEDROCK_TOKEN = 'bad-bedrock-token';

const SIGV4 = /^AWS4-HMAC-SHA256 Credential=([A-Z0-9]+)\/(\d{8})\/([a-z0-9-]+)\/([a-z-]+)\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/;

/** An AWS restJson error answer. */
export const awsError = (status: number, type: string, message: string): Reply => ({
  status,
  headers: { 'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` },
  json: { message },
});

const codec = new EventStreamCodec(
  (bytes) => Buffer.from(bytes).toString('utf8'),
  (text) => new Uint8Array(Buffer.from(text, 'utf8')),
);
const str = (value: string) => ({ type: 'string' as const, value });

/** One event-stream frame of a ConverseStream event (`messageStart`, `contentBlockDelta`, …) with its JSON payload. */
export function eventFrame(type: string, payload: unknown): Uint8Array {
  const headers: MessageHeaders = { ':event-type': str(type), ':content-type': str('application/json'), ':message-type': str('event') };
  return codec.encode({ headers, body: new Uint8Array(Buffer.from(JSON.stringify(payload))) });
}

/** An exception frame inside the stream (`throttlingException`, `modelStreamErrorException`, …). */
export function exceptionFrame(type: string, message: string): Uint8Array {
  const headers: MessageHeaders = { ':exception-type': str(type), ':content-type': str('application/json'), ':message-type': str('exception') };
  return codec.encode({ headers, body: new Uint8Array(Buffer.from(JSON.stringify({ message }))) });
}

/** A ConverseStream reply of these frames. */
export const converseStream = (frames: Uint8Array[], options: { cutAfter?: number; endEarly?: number; holdAfter?: number } = {}): Reply => ({
  frames,
  contentType: 'application/vnd.amazon.eventstream',
  ...options,
});

function lastUserText(body: Record<string, unknown>): string {
  const messages = (body.messages ?? []) as { role: string; content: { text?: string }[] }[];
  return messages.at(-1)?.content.find((block) => block.text !== undefined)?.text ?? '';
}

export const FAKE_USAGE = { inputTokens: 11, outputTokens: 4, totalTokens: 18, cacheReadInputTokens: 3 };

export function fakeConverseResponse(body: Record<string, unknown>) {
  return {
    output: { message: { role: 'assistant', content: [{ text: `echo: ${lastUserText(body)}` }] } },
    stopReason: 'end_turn',
    usage: FAKE_USAGE,
    metrics: { latencyMs: 12 },
  };
}

/** The echo as ConverseStream frames: messageStart, one text block in 5-character deltas, messageStop, metadata. */
export function fakeConverseFrames(body: Record<string, unknown>): Uint8Array[] {
  const pieces = `echo: ${lastUserText(body)}`.match(/.{1,5}/gs) ?? [];
  return [
    eventFrame('messageStart', { role: 'assistant' }),
    ...pieces.map((text) => eventFrame('contentBlockDelta', { contentBlockIndex: 0, delta: { text } })),
    eventFrame('contentBlockStop', { contentBlockIndex: 0 }),
    eventFrame('messageStop', { stopReason: 'end_turn' }),
    eventFrame('metadata', { usage: FAKE_USAGE, metrics: { latencyMs: 12 } }),
  ];
}

/** The scheme and identity a request was authorised with, or the error it gets (SigV4 for `service`, or a bearer key). */
export function authorised(request: RecordedRequest, service: string): Reply | null {
  const authorization = String(request.headers.authorization ?? '');
  if (authorization.startsWith('Bearer ')) {
    if (authorization === `Bearer ${BAD_BEDROCK_TOKEN}`) return awsError(403, 'UnrecognizedClientException', 'Invalid API Key format: Must start with pre-defined prefix');
    return null;
  }
  const match = SIGV4.exec(authorization);
  if (!match) return awsError(403, 'MissingAuthenticationTokenException', 'Missing Authentication Token');
  const [, keyId, , , signedService, signedHeaders] = match;
  if (keyId !== TEST_ACCESS_KEY_ID) return awsError(403, 'UnrecognizedClientException', 'The security token included in the request is invalid.');
  if (signedService !== service || !signedHeaders.split(';').includes('host') || !request.headers['x-amz-date']) {
    return awsError(403, 'InvalidSignatureException', 'The request signature we calculated does not match the signature you provided.');
  }
  return null;
}

const modelOf = (match: RegExpExecArray) => decodeURIComponent(match[1]);

export async function startBedrockFake(): Promise<VendorServer> {
  const routes: Route[] = [
    {
      method: 'POST',
      path: /^\/model\/([^/]+)\/converse$/,
      handle: (request) => authorised(request, 'bedrock') ?? { json: fakeConverseResponse(request.json as Record<string, unknown>) },
    },
    {
      method: 'POST',
      path: /^\/model\/([^/]+)\/converse-stream$/,
      handle: (request) => authorised(request, 'bedrock') ?? converseStream(fakeConverseFrames(request.json as Record<string, unknown>)),
    },
    {
      method: 'POST',
      path: /^\/model\/([^/]+)\/invoke$/,
      handle(request, match) {
        const denied = authorised(request, 'bedrock');
        if (denied) return denied;
        const model = modelOf(match);
        const body = request.json as Record<string, unknown>;
        if (model.startsWith('cohere.embed')) {
          const texts = body.texts as string[];
          if (!Array.isArray(texts) || texts.length > 96) return awsError(400, 'ValidationException', 'texts: between 1 and 96 texts');
          const vectors = texts.map((text) => fakeVector(text, body.output_dimension as number | undefined));
          return { json: { id: 'emb-1', response_type: body.embedding_types ? 'embeddings_by_type' : 'embeddings_floats', texts, embeddings: body.embedding_types ? { float: vectors } : vectors } };
        }
        if (model.startsWith('amazon.titan-embed')) {
          if (typeof body.inputText !== 'string') return awsError(400, 'ValidationException', 'Malformed input request: required key [inputText] not found');
          return { json: { embedding: fakeVector(body.inputText, body.dimensions as number | undefined), inputTextTokenCount: body.inputText.split(/\s+/).length } };
        }
        return awsError(404, 'ResourceNotFoundException', `Could not resolve the foundation model from the provided model identifier ${model}.`);
      },
    },
    {
      method: 'GET',
      path: /^\/foundation-models$/,
      handle: (request) => authorised(request, 'bedrock') ?? { json: { modelSummaries: BEDROCK_MODELS.map((model) => ({ ...model, modelArn: `arn:aws:bedrock:us-east-1::foundation-model/${model.modelId}` })) } },
    },
  ];
  return VendorServer.start(routes);
}
