import { afterEach, describe, expect, it } from 'vitest';
import { Hub, InvalidRequestError, LLMProvider, UnsupportedProviderError, amessages } from '../../src/hub/index.ts';
import { resetDeprecationWarningForTests, selectProvider } from '../../src/hub/core/selection.ts';
import { OPENAI_COMPATIBLE_SERVICES } from '../../src/hub/providers/openai/index.ts';

function captureWarnings(): { warnings: Error[]; stop: () => void } {
  const warnings: Error[] = [];
  const listener = (warning: Error) => warnings.push(warning);
  process.on('warning', listener);
  return { warnings, stop: () => process.off('warning', listener) };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('provider selection', () => {
  afterEach(() => resetDeprecationWarningForTests());

  it.each([
    ['openai:gpt-4o', ['openai', 'gpt-4o']],
    ['groq:llama-3.3-70b', ['groq', 'llama-3.3-70b']],
    ['vllm:org/model:tag', ['vllm', 'org/model:tag']],
    ['openrouter/meta/llama:free', ['openrouter', 'meta/llama:free']],
    ['OpenAI:gpt-4o', ['openai', 'gpt-4o']],
  ])('split_model_provider(%j): the first delimiter decides', (model, expected) => {
    expect(Hub.split_model_provider(model)).toEqual(expected);
  });

  it('throws InvalidRequestError (the spec ValueError) on a string with neither delimiter', () => {
    expect(() => Hub.split_model_provider('gpt-4o')).toThrow(InvalidRequestError);
    expect(() => Hub.split_model_provider('openai:')).toThrow(InvalidRequestError);
  });

  it('rejects unknown providers with UnsupportedProviderError listing the supported ones', () => {
    let caught: unknown;
    try {
      Hub.split_model_provider('nosuch:model');
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(UnsupportedProviderError);
    const error = caught as UnsupportedProviderError;
    expect(error.provider_key).toBe('nosuch');
    expect(error.supported_providers).toEqual(Hub.get_supported_providers());
    expect(error.message).toContain('openai');
    expect(() => Hub.create('nosuch')).toThrow(UnsupportedProviderError);
  });

  it('the provider parameter wins and leaves the model string untouched', () => {
    expect(selectProvider('groq', 'openai/gpt-oss-120b')).toEqual({ provider: 'groq', model: 'openai/gpt-oss-120b' });
    expect(selectProvider(LLMProvider.OPENAI, 'gpt-4o')).toEqual({ provider: 'openai', model: 'gpt-4o' });
  });

  it('provider/model emits one DeprecationWarning per process; provider:model none', async () => {
    await tick(); // warnings of earlier tests arrive on a later tick
    const capture = captureWarnings();
    try {
      Hub.split_model_provider('openai:gpt-4o');
      await tick();
      expect(capture.warnings).toHaveLength(0);
      Hub.split_model_provider('openai/gpt-4o');
      Hub.split_model_provider('groq/llama');
      await tick();
      const deprecations = capture.warnings.filter((w) => w.name === 'DeprecationWarning');
      expect(deprecations).toHaveLength(1);
      expect((deprecations[0] as Error & { code?: string }).code).toBe('HUB_DEP_PROVIDER_SLASH_MODEL');
    } finally {
      capture.stop();
    }
  });

  it('the async functions reject an unknown provider before any request', async () => {
    await expect(amessages({ model: 'nosuch:x', max_tokens: 5, messages: [] })).rejects.toBeInstanceOf(UnsupportedProviderError);
  });
});

describe('registry and metadata', () => {
  const required = [
    'openai', 'groq', 'deepseek', 'together', 'fireworks', 'openrouter', 'xai', 'cerebras', 'sambanova',
    'perplexity', 'huggingface', 'azureopenai', 'lmstudio', 'llamacpp', 'llamafile', 'vllm',
  ];

  it('lists every OpenAI-compatible service among the supported providers, sorted', () => {
    const supported = Hub.get_supported_providers();
    for (const name of required) expect(supported).toContain(name);
    expect(supported).toEqual([...supported].sort());
  });

  it('get_all_provider_metadata is sorted by name and has the spec fields', () => {
    const all = Hub.get_all_provider_metadata();
    expect(all.map((m) => m.name)).toEqual([...all.map((m) => m.name)].sort((a, b) => a.localeCompare(b)));
    expect(all.map((m) => m.name)).toEqual(Hub.get_supported_providers());
    for (const metadata of all) {
      for (const flag of ['streaming', 'embedding', 'responses', 'list_models', 'messages', 'batch', 'completion', 'rerank', 'count_tokens'] as const) {
        expect(typeof metadata[flag], `${metadata.name}.${flag}`).toBe('boolean');
      }
      // rerank: the vendors with a rerank API and this project's cross-encoder servers, no one else
      expect(metadata.rerank, metadata.name).toBe(['cohere', 'encoder', 'voyage'].includes(metadata.name));
      // count_tokens: Anthropic's own API only (Foundry and Vertex serve no count_tokens of their own through Hub yet)
      expect(metadata.count_tokens, metadata.name).toBe(metadata.name === 'anthropic');
      // every provider speaks Messages except the embeddings-only services
      expect(metadata.messages, metadata.name).toBe(!['encoder', 'voyage'].includes(metadata.name));
    }
  });

  it('each OpenAI-compatible service has its own environment variable and base address', () => {
    const envs = OPENAI_COMPATIBLE_SERVICES.map((s) => s.metadata.env_key);
    expect(new Set(envs).size).toBe(envs.length);
    const byName = Object.fromEntries(OPENAI_COMPATIBLE_SERVICES.map((s) => [s.metadata.name, s.metadata]));
    expect(byName.openai!.env_key).toBe('OPENAI_API_KEY');
    expect(byName.groq!.default_api_base).toBe('https://api.groq.com/openai/v1');
    expect(byName.vllm!.api_key_optional).toBe(true);
    expect(byName.openai!.batch).toBe(true);
  });

  it('LLMProvider values are provider keys', () => {
    const supported = new Set(Hub.get_supported_providers());
    for (const name of required) expect(Object.values(LLMProvider)).toContain(name);
    expect(supported.has(LLMProvider.OPENAI)).toBe(true);
  });
});
