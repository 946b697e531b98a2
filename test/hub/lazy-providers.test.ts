// Vendor SDKs load on a provider's first use, not when src/hub is imported (src/hub/providers/shared/lazy.ts).
// (1) A fresh process records every module it resolves: importing the Hub and creating a Hub load no vendor SDK;
//     the first mistral call loads @mistralai/mistralai and nothing else's. (2) The lazy providers offer exactly the
//     optional members of the real implementations (the core decides capabilities by their presence). (3) The
//     wrapper's own behaviour: one load for concurrent first calls, a failed load retried, streams closed through it,
//     toHubError before and after the load.

import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { Hub } from '../../src/hub/index.ts';
import { AuthenticationError, HubError } from '../../src/hub/errors.ts';
import type { MessagesParams, MessagesResponse, MessagesStreamEvent, Provider, ProviderOptions } from '../../src/hub/provider.ts';
import { PROVIDERS } from '../../src/hub/providers/index.ts';
import { createAnthropic } from '../../src/hub/providers/anthropic/provider.ts';
import { createAzureAnthropic } from '../../src/hub/providers/azureanthropic/provider.ts';
import { createBedrock } from '../../src/hub/providers/bedrock/provider.ts';
import { createSagemaker } from '../../src/hub/providers/sagemaker/provider.ts';
import { createCohere } from '../../src/hub/providers/cohere/provider.ts';
import { createGemini } from '../../src/hub/providers/gemini/provider.ts';
import { createMistral } from '../../src/hub/providers/mistral/provider.ts';
import { createOllama } from '../../src/hub/providers/ollama/provider.ts';
import { createOpenAICompatible } from '../../src/hub/providers/openai/provider.ts';
import { createVertexAI } from '../../src/hub/providers/vertexai/provider.ts';
import { createVertexAIAnthropic } from '../../src/hub/providers/vertexaianthropic/provider.ts';
import { OPENAI_COMPATIBLE_SERVICES } from '../../src/hub/providers/openai/services.ts';
import { invoke } from '../../src/hub/core/invoke.ts';
import { lazyDefinition } from '../../src/hub/providers/shared/lazy.ts';
import { providerMetadata } from '../../src/hub/providers/shared/metadata.ts';
import { startMistralFake } from '../fakes/mistral.ts';
import { collect, failureOf } from './helpers.ts';

const run = promisify(execFile);
const hubIndex = path.resolve(fileURLToPath(new URL('../../src/hub/index.ts', import.meta.url)));
const VENDOR_SDKS = [
  'openai',
  '@anthropic-ai/sdk',
  '@anthropic-ai/foundry-sdk',
  '@anthropic-ai/vertex-sdk',
  '@google/genai',
  '@mistralai/mistralai',
  'cohere-ai',
  'ollama',
  '@aws-sdk/client-bedrock-runtime',
  '@aws-sdk/client-bedrock',
  '@aws-sdk/client-sagemaker-runtime',
];

/** The child: records the npm packages resolved after each step and prints them as JSON. */
const childScript = `
import { registerHooks } from 'node:module';
const packages = new Set();
registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    const match = /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(resolved.url);
    if (match) packages.add(match[1]);
    return resolved;
  },
});
const snapshot = () => [...packages].sort();
const report = {};
const hub = await import(process.env.HUB_INDEX);
report.afterImport = snapshot();
const mistral = hub.Hub.create('mistral', { api_key: 'k', api_base: process.env.MISTRAL_URL });
hub.Hub.create('anthropic', { api_key: 'k' });
hub.Hub.create('openai', { api_key: 'k' });
report.afterCreate = snapshot();
const message = await mistral.amessages({ model: 'mistral-small-latest', max_tokens: 20, messages: [{ role: 'user', content: 'lazy' }] });
report.text = message.content[0].text;
report.afterCall = snapshot();
console.log(JSON.stringify(report));
`;

describe('importing src/hub in a fresh process', () => {
  it('loads no vendor SDK until a provider is called, then only that provider’s', async () => {
    const fake = await startMistralFake();
    try {
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', childScript], {
        env: { ...process.env, HUB_INDEX: hubIndex, MISTRAL_URL: fake.server.url },
        timeout: 60_000,
      });
      const report = JSON.parse(stdout.trim().split('\n').at(-1)!) as { afterImport: string[]; afterCreate: string[]; afterCall: string[]; text: string };
      expect(report.afterImport.filter((name) => VENDOR_SDKS.includes(name))).toEqual([]);
      expect(report.afterCreate.filter((name) => VENDOR_SDKS.includes(name))).toEqual([]);
      expect(report.text).toBe('echo: lazy');
      expect(report.afterCall.filter((name) => VENDOR_SDKS.includes(name))).toEqual(['@mistralai/mistralai']);
    } finally {
      await fake.close();
    }
  });
});

const OPTIONAL_MEMBERS = ['completion', 'completionStream', 'responses', 'responsesStream', 'embedding', 'rerank', 'countTokens', 'listModels', 'batches'] as const;
const offered = (provider: Provider) => OPTIONAL_MEMBERS.filter((member) => provider[member] !== undefined);

const realFactories: Record<string, (options: ProviderOptions) => Provider> = {
  anthropic: createAnthropic,
  azureanthropic: createAzureAnthropic,
  bedrock: createBedrock,
  sagemaker: createSagemaker,
  cohere: createCohere,
  gemini: createGemini,
  mistral: createMistral,
  ollama: createOllama,
  vertexai: (options: ProviderOptions) => createVertexAI({ ...options, client_args: { project: 'p' } }),
  vertexaianthropic: (options: ProviderOptions) => createVertexAIAnthropic({ ...options, client_args: { projectId: 'p' } }),
  ...Object.fromEntries(OPENAI_COMPATIBLE_SERVICES.map((service) => [service.metadata.name, (options: ProviderOptions) => createOpenAICompatible(service, options)])),
};

describe('lazy providers offer what the real ones offer', () => {
  const options: ProviderOptions = { api_key: 'k', api_base: 'http://127.0.0.1:9' };

  it.each(Object.keys(realFactories))('%s', (name) => {
    const lazy = PROVIDERS[name].create(options);
    const real = realFactories[name](options);
    expect(offered(lazy)).toEqual(offered(real));
    expect(lazy.metadata).toBe(real.metadata);
    if (real.batches) expect(Object.keys(lazy.batches!).sort()).toEqual(Object.keys(real.batches).sort());
  });

  it('every registered provider with a vendor SDK is compared above', () => {
    // encoder, voyage and watsonx speak HTTP with fetch and have no SDK to defer
    expect(Object.keys(PROVIDERS).filter((name) => !(name in realFactories)).sort()).toEqual(['encoder', 'voyage', 'watsonx']);
  });
});

const metadata = providerMetadata({ name: 'lazyfake', env_key: null, doc_url: '', default_api_base: '', streaming: true, messages: true, embedding: true });
const params: MessagesParams = { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] };
const call = { extra: {} };
const answer = { id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [], stop_reason: 'end_turn' } as unknown as MessagesResponse;

/** A fake real provider: counts creations, marks its errors, records whether its stream was closed. */
function fakeImplementation() {
  const state = { created: 0, streamClosed: false };
  const marked = new Error('vendor failure');
  const create = (): Provider => {
    state.created++;
    return {
      metadata,
      messages: async () => answer,
      async *messagesStream() {
        try {
          yield { type: 'message_start' } as MessagesStreamEvent;
          yield { type: 'message_stop' } as MessagesStreamEvent;
        } finally {
          state.streamClosed = true;
        }
      },
      embedding: async () => {
        throw marked;
      },
      toHubError: (error) => (error === marked ? new AuthenticationError('mapped', error, 'lazyfake') : undefined),
    };
  };
  return { state, marked, create };
}

describe('the lazy-loading wrapper', () => {
  it('loads the implementation once for concurrent first calls and creates one instance per provider', async () => {
    const impl = fakeImplementation();
    let loads = 0;
    const definition = lazyDefinition(metadata, async () => {
      loads++;
      return impl.create;
    });
    expect(loads).toBe(0);
    const first = definition.create({});
    const second = definition.create({});
    const answers = await Promise.all([first.messages(params, call), first.messages(params, call), second.messages(params, call)]);
    expect(answers).toEqual([answer, answer, answer]);
    expect(loads).toBe(1);
    expect(impl.state.created).toBe(2);
    // optional members follow the metadata flags
    expect(offered(first)).toEqual(['embedding']);
  });

  it('does not remember a failed load: the call fails with its error and the next call loads again', async () => {
    const impl = fakeImplementation();
    let loads = 0;
    const definition = lazyDefinition(metadata, async () => {
      if (loads++ === 0) throw new Error('Cannot find package');
      return impl.create;
    });
    const provider = definition.create({});
    expect(await failureOf(provider.messages(params, call))).toMatchObject({ message: 'Cannot find package' });
    // nothing vendor-specific exists yet to be mapped
    expect(provider.toHubError(new Error('Cannot find package'))).toBeUndefined();
    expect(await provider.messages(params, call)).toBe(answer);
    expect(loads).toBe(2);
  });

  it('delegates toHubError to the real provider once it is loaded', async () => {
    const impl = fakeImplementation();
    const provider = lazyDefinition(metadata, async () => impl.create).create({});
    expect(provider.toHubError(impl.marked)).toBeUndefined();
    const failure = await failureOf(provider.embedding!({ model: 'm', inputs: ['x'] }, call));
    expect(failure).toBe(impl.marked);
    expect(provider.toHubError(failure)).toBeInstanceOf(AuthenticationError);
  });

  it('streams through the wrapper and closes the real stream when the consumer stops early', async () => {
    const impl = fakeImplementation();
    const provider = lazyDefinition(metadata, async () => impl.create).create({});
    expect((await collect(provider.messagesStream(params, call))).map((event) => event.type)).toEqual(['message_start', 'message_stop']);
    impl.state.streamClosed = false;
    for await (const event of provider.messagesStream(params, call)) {
      expect(event.type).toBe('message_start');
      break;
    }
    expect(impl.state.streamClosed).toBe(true);
  });

  it('loads before the first attempt: a load slower than the timeout does not time the call out', async () => {
    const impl = fakeImplementation();
    let loads = 0;
    const provider = lazyDefinition(metadata, async () => {
      loads++;
      await new Promise((resolve) => setTimeout(resolve, 300));
      return () => ({ ...impl.create(), messages: async (_params, { signal }) => (signal?.throwIfAborted(), answer) });
    }).create({});
    const settings = { provider, max_retries: 0, timeout: 100, unified: true, extra: {} };
    expect(await invoke(settings, (callOptions) => provider.messages(params, callOptions))).toBe(answer);
    expect(loads).toBe(1);
  });

  it('a failed load still fails the call with the load’s error, through the core', async () => {
    const provider = lazyDefinition(metadata, async () => {
      throw new Error('Cannot find package');
    }).create({});
    const settings = { provider, max_retries: 2, timeout: 10_000, unified: true, extra: {} };
    expect(await failureOf(invoke(settings, (callOptions) => provider.messages(params, callOptions)))).toMatchObject({ message: 'Cannot find package' });
  });

  it('raises a missing Azure endpoint at Hub.create, before anything is loaded, as before', () => {
    const saved = process.env.AZURE_OPENAI_ENDPOINT;
    delete process.env.AZURE_OPENAI_ENDPOINT;
    try {
      expect(() => Hub.create('azureopenai', { api_key: 'k' })).toThrow(/AZURE_OPENAI_ENDPOINT/);
    } finally {
      if (saved !== undefined) process.env.AZURE_OPENAI_ENDPOINT = saved;
    }
  });

  it('maps a real SDK error after the lazy load through the public API (unified exceptions)', async () => {
    const hub = Hub.create('anthropic', { api_key: 'k', api_base: 'http://127.0.0.1:9', unified_exceptions: true, max_retries: 0 });
    const failure = await failureOf(hub.amessages({ ...params, stream: false }));
    // the Anthropic SDK's connection error, mapped by the provider's own toHubError after the load
    expect(failure).toBeInstanceOf(HubError);
    expect((failure as HubError).original_exception?.constructor.name).toBe('APIConnectionError');
  });
});
