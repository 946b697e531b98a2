// The provider registry: provider key → definition (static metadata + factory).
// One import and one entry per provider; keep the entries sorted by key.

import type { ProviderDefinition } from '../provider.ts';
import { anthropicProvider } from './anthropic/index.ts';
import { azureanthropicProvider } from './azureanthropic/index.ts';
import { bedrockProvider } from './bedrock/index.ts';
import { cohereProvider } from './cohere/index.ts';
import { encoderProvider } from './encoder/index.ts';
import { geminiProvider } from './gemini/index.ts';
import { mistralProvider } from './mistral/index.ts';
import { ollamaProvider } from './ollama/index.ts';
import { openAICompatibleProviders } from './openai/index.ts';
import { sagemakerProvider } from './sagemaker/index.ts';
import { vertexaiProvider } from './vertexai/index.ts';
import { vertexaianthropicProvider } from './vertexaianthropic/index.ts';
import { voyageProvider } from './voyage/index.ts';
import { watsonxProvider } from './watsonx/index.ts';

export const PROVIDERS: Readonly<Record<string, ProviderDefinition>> = {
  ...openAICompatibleProviders,
  anthropic: anthropicProvider,
  azureanthropic: azureanthropicProvider,
  bedrock: bedrockProvider,
  cohere: cohereProvider,
  encoder: encoderProvider,
  gemini: geminiProvider,
  mistral: mistralProvider,
  ollama: ollamaProvider,
  sagemaker: sagemakerProvider,
  vertexai: vertexaiProvider,
  vertexaianthropic: vertexaianthropicProvider,
  voyage: voyageProvider,
  watsonx: watsonxProvider,
};
