// The OpenAI-compatible services: one implementation (./provider.ts), a default base address, an environment
// variable and what each service's chat dialect accepts. Capability flags follow each vendor's documentation.

import type { ChatDialect } from '../../openai-chat/request-to-chat.ts';
import { InvalidRequestError } from '../../errors.ts';
import type { ProviderMetadata, ProviderOptions } from '../../provider.ts';
import { providerMetadata } from '../shared/metadata.ts';

export interface OpenAICompatibleService {
  metadata: ProviderMetadata;
  dialect: Omit<ChatDialect, 'provider_name'>;
  /** Ask for a final usage chunk in streams (stream_options.include_usage). */
  stream_usage: boolean;
  /** Azure: the key goes in an `api-key` header and the base comes from AZURE_OPENAI_ENDPOINT. */
  azure?: boolean;
}

interface ServiceSpec {
  name: string;
  env_key: string | null;
  api_key_optional?: boolean;
  base: string;
  doc_url: string;
  embedding?: boolean;
  responses?: boolean;
  list_models?: boolean;
  batch?: boolean;
  reasoning?: boolean;
  image?: boolean;
  top_k?: boolean;
  user?: boolean;
  max_completion_tokens?: boolean;
  stream_usage?: boolean;
  azure?: boolean;
}

function service(spec: ServiceSpec): OpenAICompatibleService {
  return {
    metadata: providerMetadata({
      name: spec.name,
      env_key: spec.env_key,
      api_key_optional: spec.api_key_optional,
      doc_url: spec.doc_url,
      default_api_base: spec.base,
      streaming: true,
      messages: true,
      completion: true,
      embedding: spec.embedding,
      responses: spec.responses,
      list_models: spec.list_models ?? true,
      batch: spec.batch,
      reasoning: spec.reasoning,
      image: spec.image,
    }),
    dialect: {
      top_k: spec.top_k ?? false,
      reasoning: spec.reasoning ?? false,
      max_tokens_field: spec.max_completion_tokens ? 'max_completion_tokens' : 'max_tokens',
      user: spec.user ?? false,
    },
    stream_usage: spec.stream_usage ?? true,
    ...(spec.azure ? { azure: true } : {}),
  };
}

const local = { api_key_optional: true, embedding: true, top_k: true, user: true, image: true } as const;

export const OPENAI_COMPATIBLE_SERVICES: readonly OpenAICompatibleService[] = [
  service({
    name: 'openai', env_key: 'OPENAI_API_KEY', base: 'https://api.openai.com/v1',
    doc_url: 'https://platform.openai.com/docs/api-reference',
    embedding: true, responses: true, batch: true, reasoning: true, image: true, user: true, max_completion_tokens: true,
  }),
  service({
    name: 'azureopenai', env_key: 'AZURE_OPENAI_API_KEY', base: '',
    doc_url: 'https://learn.microsoft.com/azure/ai-foundry/openai/reference',
    embedding: true, responses: true, batch: true, reasoning: true, image: true, user: true, max_completion_tokens: true,
    azure: true,
  }),
  service({ name: 'cerebras', env_key: 'CEREBRAS_API_KEY', base: 'https://api.cerebras.ai/v1', doc_url: 'https://inference-docs.cerebras.ai/api-reference', reasoning: true, user: true }),
  service({ name: 'deepseek', env_key: 'DEEPSEEK_API_KEY', base: 'https://api.deepseek.com/v1', doc_url: 'https://api-docs.deepseek.com/', user: true }),
  service({ name: 'fireworks', env_key: 'FIREWORKS_API_KEY', base: 'https://api.fireworks.ai/inference/v1', doc_url: 'https://docs.fireworks.ai/api-reference', embedding: true, reasoning: true, image: true, top_k: true, user: true }),
  service({ name: 'groq', env_key: 'GROQ_API_KEY', base: 'https://api.groq.com/openai/v1', doc_url: 'https://console.groq.com/docs/api-reference', responses: true, batch: true, reasoning: true, image: true, user: true }),
  service({ name: 'huggingface', env_key: 'HF_TOKEN', base: 'https://router.huggingface.co/v1', doc_url: 'https://huggingface.co/docs/inference-providers', image: true }),
  service({ name: 'llamacpp', env_key: 'LLAMACPP_API_KEY', base: 'http://127.0.0.1:8080/v1', doc_url: 'https://github.com/ggml-org/llama.cpp/tree/master/tools/server', ...local }),
  service({ name: 'llamafile', env_key: 'LLAMAFILE_API_KEY', base: 'http://127.0.0.1:8080/v1', doc_url: 'https://github.com/Mozilla-Ocho/llamafile', ...local }),
  service({ name: 'lmstudio', env_key: 'LM_STUDIO_API_KEY', base: 'http://localhost:1234/v1', doc_url: 'https://lmstudio.ai/docs/app/api/endpoints/openai', ...local }),
  service({ name: 'openrouter', env_key: 'OPENROUTER_API_KEY', base: 'https://openrouter.ai/api/v1', doc_url: 'https://openrouter.ai/docs/api-reference', embedding: true, responses: true, reasoning: true, image: true, top_k: true, user: true }),
  service({ name: 'perplexity', env_key: 'PERPLEXITY_API_KEY', base: 'https://api.perplexity.ai', doc_url: 'https://docs.perplexity.ai/api-reference', list_models: false, reasoning: true, top_k: true }),
  service({ name: 'sambanova', env_key: 'SAMBANOVA_API_KEY', base: 'https://api.sambanova.ai/v1', doc_url: 'https://docs.sambanova.ai/cloud/api-reference', embedding: true, image: true, top_k: true }),
  service({ name: 'together', env_key: 'TOGETHER_API_KEY', base: 'https://api.together.xyz/v1', doc_url: 'https://docs.together.ai/reference', embedding: true, batch: true, image: true, top_k: true, user: true }),
  service({ name: 'vllm', env_key: 'VLLM_API_KEY', base: 'http://localhost:8000/v1', doc_url: 'https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html', ...local, reasoning: true }),
  service({ name: 'xai', env_key: 'XAI_API_KEY', base: 'https://api.x.ai/v1', doc_url: 'https://docs.x.ai/docs/api-reference', responses: true, reasoning: true, image: true, user: true }),
];

/** The base address of a client: api_base, else Azure's from AZURE_OPENAI_ENDPOINT, else the service's default. */
export function baseAddress(service: OpenAICompatibleService, options: ProviderOptions): string {
  if (options.api_base) return options.api_base;
  if (service.azure) {
    const endpoint = process.env.AZURE_OPENAI_ENDPOINT;
    if (!endpoint) {
      throw new InvalidRequestError('Pass api_base or set AZURE_OPENAI_ENDPOINT (https://<resource>.openai.azure.com)', null, service.metadata.name);
    }
    return `${endpoint.replace(/\/+$/, '')}/openai/v1`;
  }
  return service.metadata.default_api_base ?? '';
}
