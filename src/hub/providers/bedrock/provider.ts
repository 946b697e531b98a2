// Amazon Bedrock through the AWS SDK: Messages converted to Converse / ConverseStream, embeddings through
// InvokeModel (Titan and Cohere embedding models), foundation models listed by the control-plane client.
// Credentials: a Bedrock API key (api_key or AWS_BEARER_TOKEN_BEDROCK) as a bearer token, else the AWS credential
// chain (environment, profile, SSO, instance role…) signing with SigV4.

import { BedrockClient, ListFoundationModelsCommand } from '@aws-sdk/client-bedrock';
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
  InvokeModelCommand,
  type BedrockRuntimeClientConfig,
} from '@aws-sdk/client-bedrock-runtime';
import { ProviderError } from '../../errors.ts';
import type { CallOptions, EmbeddingParams, EmbeddingResponse, Model, Provider, ProviderOptions } from '../../provider.ts';
import { awsErrorToHub } from '../shared/aws-errors.ts';
import { awsRequestHandler } from '../shared/aws-http.ts';
import { embeddingList, inChunks, outputDimension } from '../shared/embeddings.ts';
import { fromConverseResponse, fromConverseStream, toConverseRequest } from './convert.ts';
import { metadata } from './metadata.ts';

/** Cohere embed models on Bedrock take at most 96 texts per call; Titan takes one text per call. */
const COHERE_EMBED_BATCH = 96;
/** Titan calls in flight at once for one embedding request. */
const TITAN_CONCURRENCY = 8;

/** The client settings both Bedrock clients share (runtime and control plane). */
export function bedrockClientConfig(options: ProviderOptions): BedrockRuntimeClientConfig {
  const env = process.env;
  return {
    // the Hub core owns retries
    maxAttempts: 1,
    requestHandler: awsRequestHandler(),
    // the SDK reads AWS_REGION and the profile's region; AWS_DEFAULT_REGION is what boto3 users have set
    ...(!env.AWS_REGION && env.AWS_DEFAULT_REGION ? { region: env.AWS_DEFAULT_REGION } : {}),
    ...(options.api_base ? { endpoint: options.api_base } : {}),
    ...(options.api_key ? { token: { token: options.api_key }, authSchemePreference: ['httpBearerAuth'] } : {}),
    ...(options.client_args as BedrockRuntimeClientConfig | undefined),
  };
}

export function createBedrock(options: ProviderOptions): Provider {
  const config = bedrockClientConfig(options);
  const runtime = new BedrockRuntimeClient(config);
  let control: BedrockClient | undefined;

  async function invokeJson(model: string, body: unknown, call: CallOptions): Promise<Record<string, unknown>> {
    const response = await runtime.send(
      new InvokeModelCommand({ modelId: model, contentType: 'application/json', accept: 'application/json', body: new TextEncoder().encode(JSON.stringify(body)) }),
      { abortSignal: call.signal },
    );
    const text = new TextDecoder().decode(response.body);
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch (error) {
      throw new ProviderError(`InvokeModel answered something that is not JSON: ${text.slice(0, 200)}`, error, metadata.name);
    }
  }

  async function cohereEmbeddings(params: EmbeddingParams, call: CallOptions): Promise<EmbeddingResponse> {
    const vectors: number[][] = [];
    for (const texts of inChunks(params.inputs, COHERE_EMBED_BATCH)) {
      const body = {
        texts,
        input_type: 'search_document',
        ...call.extra,
        ...outputDimension(params, call.extra, 'output_dimension', ['output_dimension'], metadata.name),
      };
      const answer = await invokeJson(params.model, body, call);
      // embedding_types makes Cohere answer {float: [...], int8: [...]}; the Hub returns float vectors
      const embeddings = Array.isArray(answer.embeddings) ? answer.embeddings : (answer.embeddings as { float?: unknown } | undefined)?.float;
      if (!Array.isArray(embeddings) || embeddings.length !== texts.length) {
        throw new ProviderError('The Cohere embedding answer has no float vector per text (ask for embedding_types ["float"])', null, metadata.name);
      }
      vectors.push(...(embeddings as number[][]));
    }
    // Cohere on Bedrock reports no token counts in the body
    return embeddingList(params.model, vectors, 0);
  }

  async function titanEmbeddings(params: EmbeddingParams, call: CallOptions): Promise<EmbeddingResponse> {
    const dimensions = outputDimension(params, call.extra, 'dimensions', [], metadata.name);
    const answers: Record<string, unknown>[] = [];
    for (const texts of inChunks(params.inputs, TITAN_CONCURRENCY)) {
      answers.push(...(await Promise.all(texts.map((inputText) => invokeJson(params.model, { inputText, ...call.extra, ...dimensions }, call)))));
    }
    const vectors = answers.map((answer) => {
      if (!Array.isArray(answer.embedding)) throw new ProviderError('The embedding answer has no `embedding` vector', null, metadata.name);
      return answer.embedding as number[];
    });
    const tokens = answers.reduce((sum, answer) => sum + (typeof answer.inputTextTokenCount === 'number' ? answer.inputTextTokenCount : 0), 0);
    return embeddingList(params.model, vectors, tokens);
  }

  return {
    metadata,
    async messages(params, call) {
      const response = await runtime.send(new ConverseCommand(toConverseRequest(params, call.extra)), { abortSignal: call.signal });
      return fromConverseResponse(response, params.model);
    },
    async *messagesStream(params, call) {
      const response = await runtime.send(new ConverseStreamCommand(toConverseRequest(params, call.extra)), { abortSignal: call.signal });
      if (!response.stream) throw new ProviderError('ConverseStream answered without a stream', null, metadata.name);
      yield* fromConverseStream(response.stream, params.model);
    },
    async embedding(params, call) {
      // the request body is the model family's own: Cohere embed models take a list of texts, Titan one text
      return /(^|\.)cohere\.embed/.test(params.model) ? cohereEmbeddings(params, call) : titanEmbeddings(params, call);
    },
    async listModels(call): Promise<Model[]> {
      control ??= new BedrockClient(config);
      const answer = await control.send(new ListFoundationModelsCommand({}), { abortSignal: call.signal });
      return (answer.modelSummaries ?? []).map((summary) => ({ id: summary.modelId ?? '', object: 'model', created: 0, owned_by: summary.providerName ?? 'aws' }));
    },
    toHubError: (error) => awsErrorToHub(error, metadata.name),
  };
}
