// Amazon SageMaker endpoints through the AWS SDK, as any-llm calls them: InvokeEndpoint (chat, one call per embedded
// text) and InvokeEndpointWithResponseStream (chat streams), the endpoint's name as the model. The body is what the
// serving container takes: OpenAI's chat request (TGI, LMI/vLLM and SGLang containers serve it); answers are read
// as OpenAI chat completions, or as the older `generated_text` / `outputs` / `token` shapes. Credentials and region
// as for bedrock: the AWS credential chain signing with SigV4, AWS_REGION (else AWS_DEFAULT_REGION).

import {
  InvokeEndpointCommand,
  InvokeEndpointWithResponseStreamCommand,
  SageMakerRuntimeClient,
  type ResponseStream,
  type SageMakerRuntimeClientConfig,
} from '@aws-sdk/client-sagemaker-runtime';
import { ProviderError, UnsupportedParameterError } from '../../errors.ts';
import { incompleteStreamError } from '../../message-format/stream-builder.ts';
import { chatChunksToMessageEvents, chatCompletionToMessage } from '../../openai-chat/response-from-chat.ts';
import { messagesToChatRequest, type ChatDialect } from '../../openai-chat/request-to-chat.ts';
import type { CallOptions, CompletionChunk, CompletionResponse, EmbeddingResponse, Provider, ProviderOptions } from '../../provider.ts';
import { awsErrorToHub } from '../shared/aws-errors.ts';
import { awsRequestHandler } from '../shared/aws-http.ts';
import { embeddingList, outputDimension } from '../shared/embeddings.ts';
import { metadata } from './metadata.ts';

const dialect: ChatDialect = { provider_name: metadata.name, top_k: false, reasoning: false, max_tokens_field: 'max_tokens', user: false, image: true };

export function sagemakerClientConfig(options: ProviderOptions): SageMakerRuntimeClientConfig {
  const env = process.env;
  const endpoint = options.api_base ?? env.SAGEMAKER_ENDPOINT_URL;
  return {
    // the Hub core owns retries
    maxAttempts: 1,
    requestHandler: awsRequestHandler(),
    ...(!env.AWS_REGION && env.AWS_DEFAULT_REGION ? { region: env.AWS_DEFAULT_REGION } : {}),
    ...(endpoint ? { endpoint } : {}),
    ...(options.client_args as SageMakerRuntimeClientConfig | undefined),
  };
}

type Json = Record<string, unknown>;

/** The chat request's body for the container: everything but the endpoint name (the model) and OpenAI-only knobs. */
function containerBody(request: Json, origin: 'messages' | 'completion', stream: boolean): Json {
  const { model: _model, stream: _stream, stream_options: _streamOptions, ...body } = request;
  // any-llm refuses structured output on SageMaker: containers differ in whether and how they take it
  if (body.response_format !== undefined) {
    throw new UnsupportedParameterError(origin === 'messages' ? 'output_format' : 'response_format', metadata.name, 'SageMaker containers differ in structured output');
  }
  return stream ? { ...body, stream: true } : body;
}

const text = (bytes: Uint8Array | undefined) => new TextDecoder().decode(bytes ?? new Uint8Array());

function parseJson(raw: string, what: string): unknown {
  try {
    return JSON.parse(raw);
  } catch (error) {
    throw new ProviderError(`The SageMaker endpoint's ${what} is not JSON: ${raw.slice(0, 200)}`, error, metadata.name);
  }
}

/** The generated text of the shapes older containers answer (TGI's [{generated_text}], {outputs}, {content}). */
function plainText(answer: unknown): string | undefined {
  const first = Array.isArray(answer) ? answer[0] : answer;
  if (typeof first === 'string') return first;
  if (typeof first !== 'object' || first === null) return undefined;
  const record = first as Json;
  if (typeof record.generated_text === 'string') return record.generated_text;
  const outputs = Array.isArray(record.outputs) ? record.outputs[0] : record.outputs;
  if (typeof outputs === 'string') return outputs;
  if (typeof (outputs as Json | undefined)?.text === 'string') return (outputs as Json).text as string;
  if (typeof record.content === 'string') return record.content;
  return undefined;
}

export function fromSagemakerAnswer(answer: unknown, model: string): CompletionResponse {
  const record = (typeof answer === 'object' && answer !== null && !Array.isArray(answer) ? answer : {}) as Json;
  const usage = record.usage as CompletionResponse['usage'] | undefined;
  const base = { id: typeof record.id === 'string' ? record.id : `chatcmpl-${crypto.randomUUID()}`, object: 'chat.completion' as const, created: typeof record.created === 'number' ? record.created : Math.floor(Date.now() / 1000), model };
  if (Array.isArray(record.choices) && record.choices.length > 0) {
    return {
      ...base,
      choices: (record.choices as Json[]).map((choice, position) => {
        const message = (choice.message ?? {}) as Json;
        return {
          index: typeof choice.index === 'number' ? choice.index : position,
          message: { role: 'assistant', content: (message.content as string | null) ?? null, refusal: null, ...(Array.isArray(message.tool_calls) && message.tool_calls.length ? { tool_calls: message.tool_calls as never } : {}) },
          finish_reason: ((choice.finish_reason as string | null) ?? 'stop') as 'stop',
          logprobs: null,
        };
      }),
      ...(usage ? { usage } : {}),
    };
  }
  const content = plainText(answer);
  if (content === undefined) throw new ProviderError(`The SageMaker endpoint answered a shape the Hub cannot read: ${JSON.stringify(answer).slice(0, 200)}`, null, metadata.name);
  return { ...base, choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: 'stop', logprobs: null }], ...(usage ? { usage } : {}) };
}

/**
 * The payloads of a response stream. PayloadPart bytes are the container's output cut anywhere, so they are joined
 * and read line by line: SSE (`data: {…}`, `data: [DONE]`) or JSON lines.
 */
async function* streamPayloads(events: AsyncIterable<ResponseStream>): AsyncGenerator<Json> {
  const decoder = new TextDecoder();
  let buffer = '';
  const lines = function* (final: boolean): Generator<Json> {
    const parts = buffer.split(/\r?\n/);
    buffer = final ? '' : parts.pop()!;
    for (const raw of parts) {
      const line = raw.replace(/^data:\s?/, '').trim();
      if (line === '' || line === '[DONE]' || raw.startsWith(':') || /^(event|id|retry):/.test(raw)) continue;
      yield parseJson(line, 'stream event') as Json;
    }
  };
  for await (const event of events) {
    if (event.ModelStreamError || event.InternalStreamFailure) {
      const failure = (event.ModelStreamError ?? event.InternalStreamFailure)!;
      throw Object.assign(new Error(failure.message ?? 'stream failure'), { name: event.ModelStreamError ? 'ModelStreamError' : 'InternalStreamFailure', $fault: 'server' as const });
    }
    if (!event.PayloadPart?.Bytes) continue;
    buffer += decoder.decode(event.PayloadPart.Bytes, { stream: true });
    yield* lines(false);
  }
  buffer += decoder.decode();
  yield* lines(true);
}

export async function* fromSagemakerStream(events: AsyncIterable<ResponseStream>, model: string): AsyncGenerator<CompletionChunk> {
  const id = `chatcmpl-${crypto.randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  let finished = false;
  for await (const payload of streamPayloads(events)) {
    const base = { id: typeof payload.id === 'string' ? payload.id : id, object: 'chat.completion.chunk' as const, created, model };
    if (Array.isArray(payload.choices)) {
      const chunk = { ...base, ...(payload.usage ? { usage: payload.usage as CompletionChunk['usage'] } : {}), choices: payload.choices as CompletionChunk['choices'] };
      if (chunk.choices.some((choice) => choice.finish_reason)) finished = true;
      yield chunk;
      continue;
    }
    // TGI's generate_stream: {token: {text}, generated_text (last event), details: {finish_reason}}; LMI: {outputs}
    const token = payload.token as { text?: string; special?: boolean } | undefined;
    const content = token ? (token.special ? '' : (token.text ?? '')) : (plainText(payload) ?? '');
    const details = payload.details as { finish_reason?: string } | undefined;
    const done = payload.is_finished === true || details?.finish_reason !== undefined || (token !== undefined && typeof payload.generated_text === 'string');
    const finish = done ? (details?.finish_reason === 'length' ? 'length' : 'stop') : null;
    if (done) finished = true;
    yield { ...base, choices: [{ index: 0, delta: { role: 'assistant', content }, finish_reason: finish, logprobs: null }] };
  }
  if (!finished) throw incompleteStreamError(metadata.name);
}

export function createSagemaker(options: ProviderOptions): Provider {
  const client = new SageMakerRuntimeClient(sagemakerClientConfig(options));

  async function invoke(endpoint: string, body: Json, call: CallOptions): Promise<unknown> {
    const response = await client.send(
      new InvokeEndpointCommand({ EndpointName: endpoint, ContentType: 'application/json', Accept: 'application/json', Body: new TextEncoder().encode(JSON.stringify(body)) }),
      { abortSignal: call.signal },
    );
    return parseJson(text(response.Body), 'answer');
  }

  async function chat(request: Json, origin: 'messages' | 'completion', call: CallOptions): Promise<CompletionResponse> {
    const endpoint = String(request.model);
    return fromSagemakerAnswer(await invoke(endpoint, containerBody(request, origin, false), call), endpoint);
  }

  async function* chatStream(request: Json, origin: 'messages' | 'completion', call: CallOptions): AsyncGenerator<CompletionChunk> {
    const endpoint = String(request.model);
    const body = containerBody(request, origin, true);
    const response = await client.send(
      new InvokeEndpointWithResponseStreamCommand({ EndpointName: endpoint, ContentType: 'application/json', Body: new TextEncoder().encode(JSON.stringify(body)) }),
      { abortSignal: call.signal },
    );
    if (!response.Body) throw new ProviderError('InvokeEndpointWithResponseStream answered without a stream', null, metadata.name);
    yield* fromSagemakerStream(response.Body, endpoint);
  }

  return {
    metadata,
    async messages(params, call) {
      return chatCompletionToMessage(await chat({ ...messagesToChatRequest(params, dialect), ...call.extra }, 'messages', call), metadata.name);
    },
    async *messagesStream(params, call) {
      yield* chatChunksToMessageEvents(chatStream({ ...messagesToChatRequest(params, dialect), ...call.extra }, 'messages', call), metadata.name);
    },
    completion: (params, call) => chat({ ...params, ...call.extra }, 'completion', call),
    completionStream: (params, call) => chatStream({ ...params, ...call.extra }, 'completion', call),
    async embedding(params, call): Promise<EmbeddingResponse> {
      // one call per text, as any-llm does: {inputs, dimensions?, …extra (normalize, truncate)}
      const dimensions = outputDimension(params, call.extra, 'dimensions', [], metadata.name);
      const vectors: number[][] = [];
      let tokens = 0;
      for (const input of params.inputs) {
        const answer = await invoke(params.model, { inputs: input, ...call.extra, ...dimensions }, call);
        const record = (typeof answer === 'object' && answer !== null && !Array.isArray(answer) ? answer : {}) as Json;
        // {embeddings: [[…]]}, {embedding: […]}, or the vector(s) bare (TEI answers [[…]])
        let vector: unknown = record.embeddings ?? record.embedding ?? answer;
        if (Array.isArray(vector) && Array.isArray(vector[0])) vector = vector[0];
        if (!Array.isArray(vector) || !vector.every((value) => typeof value === 'number')) {
          throw new ProviderError('The SageMaker embedding answer has no vector', null, metadata.name);
        }
        vectors.push(vector as number[]);
        const usage = record.usage as { prompt_tokens?: unknown } | undefined;
        if (typeof usage?.prompt_tokens === 'number') tokens += usage.prompt_tokens;
      }
      return embeddingList(params.model, vectors, tokens);
    },
    toHubError: (error) => awsErrorToHub(error, metadata.name),
  };
}
