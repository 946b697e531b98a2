// The OpenAI-compatible services: one implementation (./provider.ts), a default base address, an environment
// variable, what each service's chat dialect accepts and its quirks (./quirks.ts). Capability flags follow each
// vendor's documentation; for the services added with issue 18 they follow mozilla-ai/any-llm's declarations of the
// same vendors (docs/hub.md lists where this project differs).

import type { ChatDialect } from '../../openai-chat/request-to-chat.ts';
import { InvalidRequestError } from '../../errors.ts';
import type { ProviderMetadata, ProviderOptions } from '../../provider.ts';
import { providerMetadata } from '../shared/metadata.ts';
import { completeModel, type ModelCatalog, type ServiceQuirks } from './quirks.ts';

export interface OpenAICompatibleService {
  metadata: ProviderMetadata;
  dialect: Omit<ChatDialect, 'provider_name'>;
  /** Ask for a final usage chunk in streams (stream_options.include_usage). */
  stream_usage: boolean;
  /** Azure: the key also goes in an `api-key` header. */
  azure?: boolean;
  /** A base address read from the environment when api_base is not given (required when there is no default). */
  base_env?: BaseFromEnv;
  /** Query parameters sent with every request (Azure AI model inference's `api-version`). */
  default_query?: Record<string, string>;
  quirks: ServiceQuirks;
  /** Whose batch API: OpenAI's (files + batches) or otari's own (./otari-batches.ts). */
  batch_api: 'openai' | 'otari';
}

export interface BaseFromEnv {
  name: string;
  /** Appended to the variable's value unless it already ends with it (the variable holds a host). */
  path: string;
  /** What the variable holds, for the error when it is missing. */
  example: string;
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
  base_env?: BaseFromEnv;
  default_query?: Record<string, string>;
  quirks?: ServiceQuirks;
  batch_api?: 'openai' | 'otari';
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
      image: spec.image ?? false,
    },
    stream_usage: spec.stream_usage ?? true,
    ...(spec.azure ? { azure: true } : {}),
    ...(spec.base_env ? { base_env: spec.base_env } : {}),
    ...(spec.default_query ? { default_query: spec.default_query } : {}),
    quirks: spec.quirks ?? {},
    batch_api: spec.batch_api ?? 'openai',
  };
}

const local = { api_key_optional: true, embedding: true, top_k: true, user: true, image: true } as const;

/** GitHub Models lists its models in a catalog beside the inference address: [{id, publisher, …}]. */
const githubCatalog: ModelCatalog = {
  url: (base) => `${base.replace(/\/+$/, '').replace(/\/inference$/, '')}/catalog/models`,
  headers: { accept: 'application/vnd.github+json' },
  models: (body, provider) =>
    (Array.isArray(body) ? body : [])
      .filter((entry): entry is { id: string; publisher?: unknown } => typeof entry?.id === 'string' && entry.id !== '')
      .map((entry) => completeModel({ id: entry.id, ...(typeof entry.publisher === 'string' ? { owned_by: entry.publisher } : {}) }, provider)),
};

/**
 * Azure AI model inference serves one deployed model per endpoint and describes it at GET {endpoint}/info
 * ({model_name, model_type, model_provider_name}); any-llm lists that one model.
 */
const azureModelInfo: ModelCatalog = {
  url: (base) => `${base.replace(/\/+$/, '')}/info`,
  models: (body, provider) => {
    const info = (body ?? {}) as { model_name?: unknown; model_provider_name?: unknown };
    if (typeof info.model_name !== 'string' || info.model_name === '') return [];
    return [completeModel({ id: info.model_name, ...(typeof info.model_provider_name === 'string' ? { owned_by: info.model_provider_name } : {}) }, provider)];
  },
};

/** The api-version Azure AI model inference is called with unless client_args.defaultQuery names another. */
export const AZURE_AI_INFERENCE_API_VERSION = '2024-05-01-preview';

/** z.ai's finish reasons beyond OpenAI's: the context window ran out mid-answer; the answer was intercepted. */
const zaiFinishReasons = { model_context_window_exceeded: 'length', sensitive: 'content_filter' } as const;

export const OPENAI_COMPATIBLE_SERVICES: readonly OpenAICompatibleService[] = [
  service({
    name: 'openai', env_key: 'OPENAI_API_KEY', base: 'https://api.openai.com/v1',
    doc_url: 'https://platform.openai.com/docs/api-reference',
    embedding: true, responses: true, batch: true, reasoning: true, image: true, user: true, max_completion_tokens: true,
  }),
  service({
    // Azure AI model inference (Foundry serverless and managed endpoints), as any-llm's `azure` provider: OpenAI's
    // chat and embeddings routes under the endpoint, an api-version query, the key as `api-key` and bearer
    name: 'azure', env_key: 'AZURE_API_KEY', base: '',
    doc_url: 'https://learn.microsoft.com/en-us/azure/foundry/foundry-models/concepts/models-sold-directly-by-azure',
    embedding: true, stream_usage: false, azure: true,
    base_env: { name: 'AZURE_AI_CHAT_ENDPOINT', path: '', example: 'https://<deployment>.<region>.models.ai.azure.com' },
    default_query: { 'api-version': AZURE_AI_INFERENCE_API_VERSION },
    quirks: { max_tokens_only: true, model_catalog: azureModelInfo },
  }),
  service({
    name: 'azureopenai', env_key: 'AZURE_OPENAI_API_KEY', base: '',
    doc_url: 'https://learn.microsoft.com/azure/ai-foundry/openai/reference',
    embedding: true, responses: true, batch: true, reasoning: true, image: true, user: true, max_completion_tokens: true,
    azure: true, base_env: { name: 'AZURE_OPENAI_ENDPOINT', path: '/openai/v1', example: 'https://<resource>.openai.azure.com' },
  }),
  service({ name: 'atlascloud', env_key: 'ATLASCLOUD_API_KEY', base: 'https://api.atlascloud.ai/v1', doc_url: 'https://www.atlascloud.ai/docs', reasoning: true }),
  service({ name: 'cascadia', env_key: 'CASCADIA_API_KEY', api_key_optional: true, base: 'http://localhost:9090/v1', doc_url: 'https://cascadia.to', reasoning: true }),
  service({ name: 'cerebras', env_key: 'CEREBRAS_API_KEY', base: 'https://api.cerebras.ai/v1', doc_url: 'https://inference-docs.cerebras.ai/api-reference', reasoning: true, user: true }),
  service({ name: 'dashscope', env_key: 'DASHSCOPE_API_KEY', base: 'https://dashscope.aliyuncs.com/compatible-mode/v1', doc_url: 'https://bailian.console.aliyun.com/cn-beijing/?tab=api#/api', embedding: true, image: true }),
  service({
    name: 'databricks', env_key: 'DATABRICKS_TOKEN', base: '', doc_url: 'https://docs.databricks.com/',
    embedding: true, reasoning: true, list_models: false,
    base_env: { name: 'DATABRICKS_HOST', path: '/serving-endpoints', example: 'https://<workspace>.cloud.databricks.com' },
  }),
  service({ name: 'deepinfra', env_key: 'DEEPINFRA_API_KEY', base: 'https://api.deepinfra.com/v1/openai', doc_url: 'https://deepinfra.com/docs/openai_api', embedding: true, reasoning: true, image: true }),
  service({ name: 'deepseek', env_key: 'DEEPSEEK_API_KEY', base: 'https://api.deepseek.com/v1', doc_url: 'https://api-docs.deepseek.com/', user: true }),
  service({ name: 'edenai', env_key: 'EDENAI_API_KEY', base: 'https://api.edenai.run/v3', doc_url: 'https://www.edenai.co/docs', embedding: true, image: true }),
  service({ name: 'fireworks', env_key: 'FIREWORKS_API_KEY', base: 'https://api.fireworks.ai/inference/v1', doc_url: 'https://docs.fireworks.ai/api-reference', embedding: true, reasoning: true, image: true, top_k: true, user: true }),
  service({ name: 'github', env_key: 'GITHUB_TOKEN', base: 'https://models.github.ai/inference', doc_url: 'https://docs.github.com/en/github-models', embedding: true, quirks: { max_tokens_only: true, model_catalog: githubCatalog } }),
  service({ name: 'gmi', env_key: 'GMI_API_KEY', base: 'https://api.gmi-serving.com/v1', doc_url: 'https://docs.gmicloud.ai/inference-engine/api-reference/llm-api-reference', responses: true, reasoning: true, quirks: { max_tokens_only: true } }),
  service({ name: 'groq', env_key: 'GROQ_API_KEY', base: 'https://api.groq.com/openai/v1', doc_url: 'https://console.groq.com/docs/api-reference', responses: true, batch: true, reasoning: true, image: true, user: true }),
  service({ name: 'huggingface', env_key: 'HF_TOKEN', base: 'https://router.huggingface.co/v1', doc_url: 'https://huggingface.co/docs/inference-providers', image: true }),
  service({ name: 'inception', env_key: 'INCEPTION_API_KEY', base: 'https://api.inceptionlabs.ai/v1', doc_url: 'https://inceptionlabs.ai/', quirks: { no_response_format: true } }),
  service({ name: 'kenari', env_key: 'KENARI_API_KEY', base: 'https://kenari.id/v1', doc_url: 'https://kenari.id/docs', reasoning: true }),
  service({ name: 'llama', env_key: 'LLAMA_API_KEY', base: 'https://api.llama.com/compat/v1', doc_url: 'https://www.llama.com/products/llama-api/', quirks: { typed_one_of: true } }),
  service({ name: 'llamacpp', env_key: 'LLAMACPP_API_KEY', base: 'http://127.0.0.1:8080/v1', doc_url: 'https://github.com/ggml-org/llama.cpp/tree/master/tools/server', ...local }),
  service({ name: 'llamafile', env_key: 'LLAMAFILE_API_KEY', base: 'http://127.0.0.1:8080/v1', doc_url: 'https://github.com/Mozilla-Ocho/llamafile', ...local }),
  service({ name: 'lmstudio', env_key: 'LM_STUDIO_API_KEY', base: 'http://localhost:1234/v1', doc_url: 'https://lmstudio.ai/docs/app/api/endpoints/openai', ...local }),
  service({ name: 'meta', env_key: 'MODEL_API_KEY', base: 'https://api.meta.ai/v1', doc_url: 'https://dev.meta.ai/docs', responses: true, image: true }),
  service({ name: 'minimax', env_key: 'MINIMAX_API_KEY', base: 'https://api.minimax.io/v1', doc_url: 'https://www.minimax.io/platform_overview', list_models: false, reasoning: true, quirks: { no_response_format: true, think_tags: true } }),
  service({ name: 'moonshot', env_key: 'MOONSHOT_API_KEY', base: 'https://api.moonshot.ai/v1', doc_url: 'https://platform.moonshot.ai/', reasoning: true }),
  service({ name: 'mzai', env_key: 'ANY_LLM_KEY', base: 'https://platform-api.any-llm.ai/api/v1', doc_url: 'https://any-llm.ai', embedding: true, reasoning: true, image: true }),
  service({ name: 'nebius', env_key: 'NEBIUS_API_KEY', base: 'https://api.studio.nebius.ai/v1', doc_url: 'https://studio.nebius.ai/', embedding: true, reasoning: true, image: true }),
  service({ name: 'neosantara', env_key: 'NEOSANTARA_API_KEY', base: 'https://api.neosantara.xyz/v1', doc_url: 'https://docs.neosantara.xyz', embedding: true, responses: true, batch: true, reasoning: true, image: true }),
  service({ name: 'openrouter', env_key: 'OPENROUTER_API_KEY', base: 'https://openrouter.ai/api/v1', doc_url: 'https://openrouter.ai/docs/api-reference', embedding: true, responses: true, reasoning: true, image: true, top_k: true, user: true }),
  service({
    name: 'otari', env_key: 'OTARI_API_KEY', api_key_optional: true, base: 'https://api.otari.ai/v1', doc_url: 'https://mozilla-ai.github.io/otari/',
    embedding: true, responses: true, batch: true, batch_api: 'otari', reasoning: true, image: true,
    base_env: { name: 'OTARI_API_BASE', path: '/v1', example: 'http://localhost:8000' }, quirks: { max_tokens_only: true },
  }),
  service({ name: 'ovhcloud', env_key: 'OVHCLOUD_API_KEY', base: 'https://oai.endpoints.kepler.ai.cloud.ovh.net/v1', doc_url: 'https://docs.ovhcloud.com/en/guides/public-cloud/ai-machine-learning/ai-endpoints-getting-started' }),
  service({ name: 'perplexity', env_key: 'PERPLEXITY_API_KEY', base: 'https://api.perplexity.ai', doc_url: 'https://docs.perplexity.ai/api-reference', list_models: false, reasoning: true, image: true, top_k: true }),
  service({ name: 'portkey', env_key: 'PORTKEY_API_KEY', base: 'https://api.portkey.ai/v1', doc_url: 'https://portkey.ai/docs', reasoning: true, image: true, quirks: { think_tags: true } }),
  service({ name: 'qiniu', env_key: 'QINIU_API_KEY', base: 'https://api.qnaigc.com/v1', doc_url: 'https://developer.qiniu.com/aitokenapi', embedding: true, reasoning: true, image: true }),
  service({ name: 'requesty', env_key: 'REQUESTY_API_KEY', base: 'https://router.requesty.ai/v1', doc_url: 'https://docs.requesty.ai', embedding: true, reasoning: true, image: true, quirks: { reasoning_object: true } }),
  service({ name: 'sambanova', env_key: 'SAMBANOVA_API_KEY', base: 'https://api.sambanova.ai/v1', doc_url: 'https://docs.sambanova.ai/cloud/api-reference', embedding: true, image: true, top_k: true }),
  service({ name: 'telnyx', env_key: 'TELNYX_API_KEY', base: 'https://api.telnyx.com/v2/ai', doc_url: 'https://developers.telnyx.com/docs/inference/getting-started', reasoning: true, image: true }),
  service({ name: 'together', env_key: 'TOGETHER_API_KEY', base: 'https://api.together.xyz/v1', doc_url: 'https://docs.together.ai/reference', embedding: true, batch: true, image: true, top_k: true, user: true }),
  service({ name: 'vllm', env_key: 'VLLM_API_KEY', base: 'http://localhost:8000/v1', doc_url: 'https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html', ...local, reasoning: true }),
  service({ name: 'xai', env_key: 'XAI_API_KEY', base: 'https://api.x.ai/v1', doc_url: 'https://docs.x.ai/docs/api-reference', responses: true, reasoning: true, image: true, user: true }),
  service({ name: 'zai', env_key: 'ZAI_API_KEY', base: 'https://api.z.ai/api/paas/v4', doc_url: 'https://docs.z.ai/guides/develop/python/introduction', reasoning: true, quirks: { no_response_format: true, finish_reasons: zaiFinishReasons } }),
];

/** The base address of a client: api_base, else the one from the service's environment variable, else its default. */
export function baseAddress(service: OpenAICompatibleService, options: ProviderOptions): string {
  if (options.api_base) return options.api_base;
  const env = service.base_env;
  const fromEnv = env ? process.env[env.name] : undefined;
  if (env && fromEnv) {
    const host = fromEnv.replace(/\/+$/, '');
    return host.endsWith(env.path) ? host : `${host}${env.path}`;
  }
  if (env && !service.metadata.default_api_base) {
    throw new InvalidRequestError(`Pass api_base or set ${env.name} (${env.example})`, null, service.metadata.name);
  }
  return service.metadata.default_api_base ?? '';
}
