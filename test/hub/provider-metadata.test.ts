// Provider metadata is true to behaviour (issue 18): for every registered provider, each capability flag is checked
// through the public API against a loopback server that refuses whatever reaches it. A flag that is false must give
// UnsupportedParameterError with nothing sent; a flag that is true must let the call through to the provider (any
// other outcome — here the server's refusal — shows the operation exists). And the list covers every provider of
// mozilla-ai/any-llm, sorted by name.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  Hub,
  LLMProvider,
  UnsupportedParameterError,
  acompletion,
  acreate_batch,
  aembedding,
  alist_batches,
  alist_models,
  amessages,
  aresponses,
  aretrieve_batch,
} from '../../src/hub/index.ts';
import type { ProviderMetadata } from '../../src/hub/index.ts';
import { PROVIDERS } from '../../src/hub/providers/index.ts';
import { VendorServer } from '../fakes/vendor-server.ts';
import { collect } from './helpers.ts';

/**
 * The providers of mozilla-ai/any-llm (its LLMProvider enum and its registry of OpenAI-compatible gateways, read at
 * commit f9499232): the Hub has each of them, and only `encoder` (this project's own server) besides.
 */
const ANY_LLM_PROVIDERS = [
  'anthropic', 'atlascloud', 'azure', 'azureanthropic', 'azureopenai', 'bedrock', 'cascadia', 'cerebras', 'cohere',
  'dashscope', 'databricks', 'deepinfra', 'deepseek', 'edenai', 'fireworks', 'gemini', 'github', 'gmi', 'groq',
  'huggingface', 'inception', 'kenari', 'llama', 'llamacpp', 'llamafile', 'lmstudio', 'meta', 'minimax', 'mistral',
  'moonshot', 'mzai', 'nebius', 'neosantara', 'ollama', 'openai', 'openrouter', 'otari', 'ovhcloud', 'perplexity',
  'portkey', 'qiniu', 'requesty', 'sagemaker', 'sambanova', 'telnyx', 'together', 'vertexai', 'vertexaianthropic',
  'vllm', 'voyage', 'watsonx', 'xai', 'zai',
];

/** any-llm providers the Hub does not have yet (issue 18 is open until this list is empty). */
const NOT_YET: string[] = [];

describe('the provider list', () => {
  it('has mozilla-ai/any-llm’s 53 providers (but those NOT_YET) and encoder, sorted by name, each under its LLMProvider value', () => {
    expect(ANY_LLM_PROVIDERS).toHaveLength(53);
    const names = Hub.get_all_provider_metadata().map((metadata) => metadata.name);
    expect(names).toEqual([...names].sort((a, b) => a.localeCompare(b)));
    expect(ANY_LLM_PROVIDERS.filter((name) => !names.includes(name)), 'missing providers').toEqual(NOT_YET);
    expect(names.filter((name) => !ANY_LLM_PROVIDERS.includes(name)), 'providers beyond any-llm').toEqual(['encoder']);
    expect(Object.values(LLMProvider).sort()).toEqual([...names].sort());
  });
});

// ---------------------------------------------------------------------------------------------------------------
// capability flags

/** Refuses every request with a 400 (an error no core retries), recording it. */
let server: VendorServer;
const refusal = { status: 400, json: { error: { message: 'capability probe', type: 'invalid_request_error' }, message: 'capability probe' } };
beforeAll(async () => {
  server = await VendorServer.start(
    ['GET', 'POST', 'PUT', 'DELETE'].map((method) => ({ method, path: /.*/, handle: () => refusal })),
  );
});
afterAll(() => server.close());
beforeEach(() => server.reset());

const batchDir = mkdtempSync(path.join(tmpdir(), 'hub-capabilities-'));
const batchFile = path.join(batchDir, 'input.jsonl');
writeFileSync(batchFile, JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'm', messages: [] } }) + '\n');

type Outcome = { refused: false } | { refused: true; parameter: string; sent: number };

/**
 * Runs a call: refused (UnsupportedParameterError naming one of `refusedAs`, with how many requests went out), or
 * let through. A refusal of some other parameter (e.g. a batch endpoint the vendor does not run) is not a refusal
 * of the capability.
 */
async function outcomeOf(refusedAs: readonly string[], call: () => Promise<unknown>): Promise<Outcome> {
  const before = server.requests.length;
  try {
    await call();
  } catch (error) {
    if (error instanceof UnsupportedParameterError && refusedAs.includes(error.parameter_name)) {
      return { refused: true, parameter: error.parameter_name, sent: server.requests.length - before };
    }
  }
  return { refused: false };
}

const hi = [{ role: 'user' as const, content: 'hi' }];
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const image = [{ role: 'user' as const, content: [{ type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png' as const, data: PIXEL } }] }];

type Options = { provider: string; [option: string]: unknown };

/**
 * Each checked flag: the calls that need it and the parameter_names its refusal may carry (a provider without
 * messages refuses streaming, reasoning and images as `messages`).
 */
const PROBES: Record<string, { refusedAs: readonly string[]; calls: ((o: Options) => Promise<unknown>)[] }> = {
  messages: { refusedAs: ['messages'], calls: [(o) => amessages({ ...o, model: 'm', max_tokens: 16, messages: hi })] },
  streaming: { refusedAs: ['stream', 'messages'], calls: [(o) => collect(amessages({ ...o, model: 'm', max_tokens: 16, messages: hi, stream: true }))] },
  embedding: { refusedAs: ['embedding'], calls: [(o) => aembedding({ ...o, model: 'e', inputs: ['hi'] })] },
  responses: { refusedAs: ['responses'], calls: [(o) => aresponses({ ...o, model: 'm', input: 'hi' })] },
  list_models: { refusedAs: ['list_models'], calls: [(o) => alist_models(o)] },
  batch: {
    refusedAs: ['create_batch', 'retrieve_batch', 'list_batches'],
    calls: [
      (o) => acreate_batch({ ...o, input_file_path: batchFile, endpoint: '/v1/chat/completions' } as never),
      (o) => aretrieve_batch({ ...o, batch_id: 'batch_probe' } as never),
      (o) => alist_batches(o as never),
    ],
  },
  reasoning: {
    refusedAs: ['thinking', 'messages'],
    calls: [(o) => amessages({ ...o, model: 'm', max_tokens: 2048, messages: hi, thinking: { type: 'enabled', budget_tokens: 1024 } })],
  },
  image: { refusedAs: ['image', 'messages'], calls: [(o) => amessages({ ...o, model: 'm', max_tokens: 16, messages: image })] },
};

const all: [string, ProviderMetadata][] = Hub.get_all_provider_metadata().map((metadata) => [metadata.name, metadata]);

/**
 * What some providers need beyond a key and an address so that a probe reaches the loopback server and nothing else:
 * SageMaker's AWS credentials and region, watsonx's IAM token endpoint and project.
 */
const PROBE_OPTIONS: Record<string, () => Record<string, unknown>> = {
  // SigV4 needs credentials; given here, the AWS credential chain is not searched (no instance metadata service)
  sagemaker: () => ({ client_args: { region: 'us-east-1', credentials: { accessKeyId: 'AKIDPROBE', secretAccessKey: 'probe-secret' } } }),
  watsonx: () => ({ client_args: { iam_url: `${server.url}/identity/token`, project_id: 'probe-project' } }),
};

describe('each capability flag says what the provider does', () => {
  const options = (provider: string) => ({
    provider, api_key: 'probe-key', api_base: server.url, max_retries: 0, timeout: 5_000, unified_exceptions: true, ...PROBE_OPTIONS[provider]?.(),
  });

  it.each(all)('%s', async (provider, metadata) => {
    const o = options(provider);
    for (const [flag, probe] of Object.entries(PROBES)) {
      for (const call of probe.calls) {
        const outcome = await outcomeOf(probe.refusedAs, () => call(o));
        if (metadata[flag as keyof ProviderMetadata]) expect(outcome, `${provider}.${flag} is true, yet the call was refused`).toEqual({ refused: false });
        else expect(outcome, `${provider}.${flag} is false, yet the call was let through`).toMatchObject({ refused: true, sent: 0 });
      }
    }
    // completion: true when the provider speaks chat completions itself; otherwise the core converts to messages,
    // so a completion call works exactly where messages do
    const instance = PROVIDERS[provider]!.create({ api_key: 'probe-key', api_base: server.url });
    expect([instance.completion !== undefined, instance.completionStream !== undefined], `${provider}.completion`).toEqual([metadata.completion, metadata.completion]);
    const completion = await outcomeOf(['messages', 'completion'], () => acompletion({ ...o, model: 'm', messages: hi }));
    expect(completion.refused, `${provider}: completion is refused exactly when messages are`).toBe(!metadata.completion && !metadata.messages);
  });
});
