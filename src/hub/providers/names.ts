// The provider "enum": a frozen object of provider keys (erasable TypeScript has no enum).
// Every key the project implements; `Hub.get_supported_providers()` lists those actually registered.

export const LLMProvider = Object.freeze({
  ANTHROPIC: 'anthropic',
  AZUREANTHROPIC: 'azureanthropic',
  AZUREOPENAI: 'azureopenai',
  BEDROCK: 'bedrock',
  CEREBRAS: 'cerebras',
  COHERE: 'cohere',
  DEEPSEEK: 'deepseek',
  ENCODER: 'encoder',
  FIREWORKS: 'fireworks',
  GEMINI: 'gemini',
  GROQ: 'groq',
  HUGGINGFACE: 'huggingface',
  LLAMACPP: 'llamacpp',
  LLAMAFILE: 'llamafile',
  LMSTUDIO: 'lmstudio',
  MISTRAL: 'mistral',
  OLLAMA: 'ollama',
  OPENAI: 'openai',
  OPENROUTER: 'openrouter',
  PERPLEXITY: 'perplexity',
  SAMBANOVA: 'sambanova',
  TOGETHER: 'together',
  VERTEXAI: 'vertexai',
  VERTEXAIANTHROPIC: 'vertexaianthropic',
  VLLM: 'vllm',
  VOYAGE: 'voyage',
  XAI: 'xai',
} as const);

export type LLMProviderName = (typeof LLMProvider)[keyof typeof LLMProvider];
