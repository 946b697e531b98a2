/**
 * The gateway's provider during the soak: the repository's fake OpenAI server (test/fakes), told per request which
 * fault to play by a marker in the last message, so that every failure the soak sees is known to be injected or not.
 */
import {
  chatChunks,
  chatCompletionBody,
  EMBEDDING_TOKENS_PER_INPUT,
  errorBody,
  FakeOpenAIServer,
  fakeEmbedding,
  type RecordedRequest,
  type ScriptedReply,
} from '../../test/fakes/openai-compatible.ts';

/** What the provider does with a chat call whose last message contains `[fault:<name>]`. */
export type ProviderFault = 'error-500' | 'stall' | 'stall-stream' | 'slow' | 'slow-stream';

export const faultMarker = (fault: ProviderFault) => `[fault:${fault}]`;

/**
 * How long a stalled provider holds its answer: longer than the gateway's upstream timeout, which must end the wait
 * (504, or a `timeout_error` event in a stream).
 */
const STALL_MS = 5_000;
/** A slow answer, for client aborts mid-flight: long enough to abort during it, shorter than the upstream timeout. */
export const SLOW_MS = 600;

function chatReply(request: RecordedRequest): ScriptedReply {
  const body = request.body as { model?: string; stream?: boolean; messages?: { content?: unknown }[] };
  const model = String(body.model ?? 'unknown');
  const last = String(body.messages?.at(-1)?.content ?? '');
  const fault = /\[fault:([a-z0-9-]+)\]/.exec(last)?.[1] as ProviderFault | undefined;
  const chunks = chatChunks(model);
  switch (fault) {
    case 'error-500':
      return { status: 500, json: errorBody('The server had an error while processing your request', 'server_error') };
    case 'stall':
      return { delayMs: STALL_MS, then: { json: chatCompletionBody(model) } };
    case 'stall-stream':
      // two events, then silence until the client (the gateway) gives up
      return { sse: chunks.slice(0, 2), hold: true };
    case 'slow':
      return { delayMs: SLOW_MS, then: { json: chatCompletionBody(model) } };
    case 'slow-stream':
      return { sse: chunks, delayMs: SLOW_MS / chunks.length };
    default:
      return body.stream ? { sse: chunks } : { json: chatCompletionBody(model) };
  }
}

/** The default embeddings answer (float arrays; the SDK's base64 when asked). */
function embeddingsReply(request: RecordedRequest): ScriptedReply {
  const body = request.body as { model?: string; input?: string | string[]; encoding_format?: string };
  const inputs = Array.isArray(body.input) ? body.input : [String(body.input)];
  const vector = (text: string) => (body.encoding_format === 'base64' ? Buffer.from(new Float32Array(fakeEmbedding(text)).buffer).toString('base64') : fakeEmbedding(text));
  return {
    json: {
      object: 'list',
      model: body.model,
      data: inputs.map((text, index) => ({ object: 'embedding', index, embedding: vector(text) })),
      usage: { prompt_tokens: inputs.length * EMBEDDING_TOKENS_PER_INPUT, total_tokens: inputs.length * EMBEDDING_TOKENS_PER_INPUT },
    },
  };
}

export interface SoakProvider {
  fake: FakeOpenAIServer;
  /** The soak's numbers (`soak <n>` in the prompt) of every chat and embeddings call the provider received. */
  served: Set<string>;
}

/** The fake on 127.0.0.1, keeping no requests (the soak sends tens of thousands), only which calls it received. */
export async function startProvider(requestIdIn: (text: string) => string | undefined): Promise<SoakProvider> {
  const fake = await FakeOpenAIServer.start({ record: false });
  const served = new Set<string>();
  const noting = (reply: (request: RecordedRequest) => ScriptedReply) => (request: RecordedRequest) => {
    const n = requestIdIn(JSON.stringify(request.body));
    if (n !== undefined) served.add(n);
    return reply(request);
  };
  fake.handle('POST /v1/chat/completions', noting(chatReply));
  fake.handle('POST /v1/embeddings', noting(embeddingsReply));
  return { fake, served };
}
