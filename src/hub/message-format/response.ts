// Builds Messages responses (Anthropic format) from what a vendor returned.

import { randomBytes } from 'node:crypto';
import type Anthropic from '@anthropic-ai/sdk';
import { ProviderError } from '../errors.ts';

export interface UsageCounts {
  /** Input tokens not read from the cache (Anthropic's input_tokens excludes cache reads). */
  input: number;
  output: number;
  cacheRead?: number | null;
  thinking?: number | null;
}

export function messageUsage(counts: UsageCounts): Anthropic.Usage {
  return {
    input_tokens: counts.input,
    output_tokens: counts.output,
    cache_creation_input_tokens: null,
    cache_read_input_tokens: counts.cacheRead ?? null,
    cache_creation: null,
    inference_geo: null,
    output_tokens_details: counts.thinking !== undefined && counts.thinking !== null ? { thinking_tokens: counts.thinking } : null,
    server_tool_use: null,
    service_tier: null,
    speed: null,
  };
}

export function textBlock(text: string): Anthropic.TextBlock {
  return { type: 'text', text, citations: null };
}

export function toolUseBlock(id: string, name: string, input: unknown): Anthropic.ToolUseBlock {
  return { type: 'tool_use', id, name, input, caller: { type: 'direct' } };
}

export function thinkingBlock(thinking: string, signature = ''): Anthropic.ThinkingBlock {
  return { type: 'thinking', thinking, signature };
}

export function newMessage(fields: {
  id?: string;
  model: string;
  content: Anthropic.ContentBlock[];
  stop_reason: Anthropic.StopReason | null;
  stop_sequence?: string | null;
  usage: Anthropic.Usage;
}): Anthropic.Message {
  return {
    id: fields.id ?? generateId('msg'),
    type: 'message',
    role: 'assistant',
    model: fields.model,
    content: fields.content,
    stop_reason: fields.stop_reason,
    stop_sequence: fields.stop_sequence ?? null,
    stop_details: null,
    container: null,
    diagnostics: null,
    usage: fields.usage,
  };
}

/** Ids in Anthropic's style (msg_…, toolu_…) for vendors that return none. */
export function generateId(prefix: 'msg' | 'toolu'): string {
  return `${prefix}_hub${randomBytes(12).toString('base64url')}`;
}

/** Parses a tool call's JSON arguments; a vendor that returns invalid JSON is at fault. */
export function parseToolArguments(text: string | undefined | null, provider: string): unknown {
  if (text === undefined || text === null || text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ProviderError(`The model returned tool arguments that are not valid JSON: ${text.slice(0, 200)}`, error, provider);
  }
}
