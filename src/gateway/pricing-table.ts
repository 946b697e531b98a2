import type { PricingPrices } from './storage/index.ts';

/**
 * The day the bundled prices were taken from the providers' public price lists (standard tier, no batch or cache
 * discounts, the price below any long-context tier). The pricing entries of the configuration and of PUT
 * /v1/pricing override them; `bundled_pricing: false` turns the table off (docs/gateway.md, Pricing).
 */
export const BUNDLED_PRICES_DATE = '2026-09-23';

/** US dollars per million tokens (input, output), or per thousand search units (rerank), by `provider:model`. */
export const BUNDLED_PRICES: Readonly<Record<string, PricingPrices>> = {
  // OpenAI
  'openai:gpt-5.2': { input_cost_per_million: 1.75, output_cost_per_million: 14 },
  'openai:gpt-5.1': { input_cost_per_million: 1.25, output_cost_per_million: 10 },
  'openai:gpt-5': { input_cost_per_million: 1.25, output_cost_per_million: 10 },
  'openai:gpt-5-mini': { input_cost_per_million: 0.25, output_cost_per_million: 2 },
  'openai:gpt-5-nano': { input_cost_per_million: 0.05, output_cost_per_million: 0.4 },
  'openai:gpt-4.1': { input_cost_per_million: 2, output_cost_per_million: 8 },
  'openai:gpt-4.1-mini': { input_cost_per_million: 0.4, output_cost_per_million: 1.6 },
  'openai:gpt-4.1-nano': { input_cost_per_million: 0.1, output_cost_per_million: 0.4 },
  'openai:gpt-4o': { input_cost_per_million: 2.5, output_cost_per_million: 10 },
  'openai:gpt-4o-mini': { input_cost_per_million: 0.15, output_cost_per_million: 0.6 },
  'openai:o3': { input_cost_per_million: 2, output_cost_per_million: 8 },
  'openai:o3-mini': { input_cost_per_million: 1.1, output_cost_per_million: 4.4 },
  'openai:o4-mini': { input_cost_per_million: 1.1, output_cost_per_million: 4.4 },
  'openai:text-embedding-3-small': { input_cost_per_million: 0.02 },
  'openai:text-embedding-3-large': { input_cost_per_million: 0.13 },
  // Anthropic
  'anthropic:claude-opus-4-6': { input_cost_per_million: 5, output_cost_per_million: 25 },
  'anthropic:claude-sonnet-4-6': { input_cost_per_million: 3, output_cost_per_million: 15 },
  'anthropic:claude-opus-4-5': { input_cost_per_million: 5, output_cost_per_million: 25 },
  'anthropic:claude-opus-4-1': { input_cost_per_million: 15, output_cost_per_million: 75 },
  'anthropic:claude-sonnet-4-5': { input_cost_per_million: 3, output_cost_per_million: 15 },
  'anthropic:claude-sonnet-4-0': { input_cost_per_million: 3, output_cost_per_million: 15 },
  'anthropic:claude-haiku-4-5': { input_cost_per_million: 1, output_cost_per_million: 5 },
  'anthropic:claude-3-5-haiku-latest': { input_cost_per_million: 0.8, output_cost_per_million: 4 },
  // Google Gemini
  'gemini:gemini-3-pro-preview': { input_cost_per_million: 2, output_cost_per_million: 12 },
  'gemini:gemini-3-flash-preview': { input_cost_per_million: 0.5, output_cost_per_million: 3 },
  'gemini:gemini-2.5-pro': { input_cost_per_million: 1.25, output_cost_per_million: 10 },
  'gemini:gemini-2.5-flash': { input_cost_per_million: 0.3, output_cost_per_million: 2.5 },
  'gemini:gemini-2.5-flash-lite': { input_cost_per_million: 0.1, output_cost_per_million: 0.4 },
  'gemini:gemini-2.0-flash': { input_cost_per_million: 0.1, output_cost_per_million: 0.4 },
  'gemini:gemini-embedding-001': { input_cost_per_million: 0.15 },
  // Mistral
  'mistral:mistral-large-2512': { input_cost_per_million: 0.5, output_cost_per_million: 1.5 },
  'mistral:mistral-medium-latest': { input_cost_per_million: 1.5, output_cost_per_million: 7.5 },
  'mistral:mistral-small-latest': { input_cost_per_million: 0.1, output_cost_per_million: 0.3 },
  'mistral:codestral-latest': { input_cost_per_million: 0.3, output_cost_per_million: 0.9 },
  'mistral:mistral-embed': { input_cost_per_million: 0.1 },
  // Cohere
  'cohere:command-a-03-2025': { input_cost_per_million: 2.5, output_cost_per_million: 10 },
  'cohere:command-r-plus': { input_cost_per_million: 2.5, output_cost_per_million: 10 },
  'cohere:command-r': { input_cost_per_million: 0.15, output_cost_per_million: 0.6 },
  'cohere:rerank-v3.5': { search_unit_cost_per_thousand: 2 },
};
