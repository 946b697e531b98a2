// Anthropic Messages request → OpenAI chat completions request, for every provider that speaks OpenAI chat.
// A parameter the target cannot honour raises UnsupportedParameterError; nothing is dropped silently, except
// cache_control marks (OpenAI-compatible services cache prompts automatically) and thinking blocks of earlier
// assistant turns (chat history has no place for them).

import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import { UnsupportedParameterError } from '../errors.ts';
import { PORTABLE_MESSAGES_FIELDS } from '../message-format/request.ts';
import type { MessagesParams } from '../provider.ts';

/** How one OpenAI-compatible service differs. */
export interface ChatDialect {
  provider_name: string;
  /** Accepts `top_k` as an extra body field. */
  top_k: boolean;
  /** Accepts `reasoning_effort`. */
  reasoning: boolean;
  /** Field that limits output tokens. */
  max_tokens_field: 'max_completion_tokens' | 'max_tokens';
  /** Accepts `metadata.user_id` as `user`. */
  user: boolean;
  /** Accepts images in user turns. */
  image: boolean;
}

type ChatMessage = OpenAI.ChatCompletionMessageParam;
type ChatContentPart = OpenAI.ChatCompletionContentPart;
type ChatRequest = OpenAI.ChatCompletionCreateParamsNonStreaming & { top_k?: number };

/** Converts a Messages request. `extra` fields are merged into the body unchanged (provider passthrough). */
export function messagesToChatRequest(params: MessagesParams, dialect: ChatDialect): ChatRequest {
  const p = dialect.provider_name;
  for (const [key, value] of Object.entries(params)) {
    if (!PORTABLE_MESSAGES_FIELDS.includes(key) && value !== undefined) throw new UnsupportedParameterError(key, p);
  }
  const body: ChatRequest = { model: params.model, messages: [] };
  if (params.system !== undefined) {
    const text = typeof params.system === 'string' ? params.system : params.system.map((b) => b.text).join('\n');
    body.messages.push({ role: 'system', content: text });
  }
  for (const message of params.messages) body.messages.push(...convertMessage(message, dialect));

  body[dialect.max_tokens_field] = params.max_tokens;
  if (params.temperature !== undefined) body.temperature = params.temperature;
  if (params.top_p !== undefined) body.top_p = params.top_p;
  if (params.top_k !== undefined) {
    if (!dialect.top_k) throw new UnsupportedParameterError('top_k', p);
    body.top_k = params.top_k;
  }
  if (params.stop_sequences !== undefined) body.stop = params.stop_sequences;
  if (params.metadata !== undefined) {
    const { user_id, ...rest } = params.metadata as { user_id?: string | null };
    if (Object.keys(rest).length > 0) throw new UnsupportedParameterError(`metadata.${Object.keys(rest)[0]}`, p);
    if (user_id) {
      if (!dialect.user) throw new UnsupportedParameterError('metadata.user_id', p);
      body.user = user_id;
    }
  }
  if (params.thinking !== undefined && params.thinking.type !== 'disabled') {
    if (!dialect.reasoning) throw new UnsupportedParameterError('thinking', p, 'The provider has no reasoning control.');
    body.reasoning_effort = reasoningEffort(params.thinking);
  }
  if (params.tools !== undefined) body.tools = params.tools.map((t) => convertTool(t, p));
  if (params.tool_choice !== undefined) {
    const choice = params.tool_choice;
    if (choice.type === 'auto') body.tool_choice = 'auto';
    else if (choice.type === 'any') body.tool_choice = 'required';
    else if (choice.type === 'none') body.tool_choice = 'none';
    else body.tool_choice = { type: 'function', function: { name: choice.name } };
    if ('disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use) body.parallel_tool_calls = false;
  }
  const format = params.output_config?.format;
  if (params.output_config?.effort != null) throw new UnsupportedParameterError('output_config.effort', p);
  if (format) {
    body.response_format = {
      type: 'json_schema',
      json_schema: { name: 'output', schema: format.schema as Record<string, unknown> },
    };
  }
  return body;
}

/** Anthropic's thinking budget → OpenAI's effort levels (budget thresholds chosen to match common presets). */
function reasoningEffort(thinking: Anthropic.ThinkingConfigParam): 'low' | 'medium' | 'high' {
  if (thinking.type === 'enabled') {
    if (thinking.budget_tokens < 4096) return 'low';
    if (thinking.budget_tokens < 16384) return 'medium';
    return 'high';
  }
  return 'medium';
}

function convertTool(tool: Anthropic.ToolUnion, provider: string): OpenAI.ChatCompletionTool {
  if (!('input_schema' in tool)) {
    const name = (tool as { name?: string }).name ?? tool.type;
    throw new UnsupportedParameterError('tools', provider, `Server tool '${name}' exists only on Anthropic.`);
  }
  const fn: OpenAI.FunctionDefinition = { name: tool.name, parameters: tool.input_schema as Record<string, unknown> };
  if (tool.description !== undefined) fn.description = tool.description;
  return { type: 'function', function: fn };
}

function convertMessage(message: Anthropic.MessageParam, dialect: ChatDialect): ChatMessage[] {
  const provider = dialect.provider_name;
  if (typeof message.content === 'string') {
    return [message.role === 'user' ? { role: 'user', content: message.content } : { role: 'assistant', content: message.content }];
  }
  if (message.role === 'assistant') {
    let text = '';
    const toolCalls: OpenAI.ChatCompletionMessageFunctionToolCall[] = [];
    for (const block of message.content) {
      if (block.type === 'text') text += block.text;
      else if (block.type === 'tool_use') {
        toolCalls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
      } else if (block.type === 'thinking' || block.type === 'redacted_thinking') continue;
      else throw new UnsupportedParameterError(`messages content block '${block.type}'`, provider);
    }
    // null content is valid only beside tool calls (OpenAI refuses it otherwise, e.g. for a thinking-only turn).
    const out: OpenAI.ChatCompletionAssistantMessageParam = { role: 'assistant', content: text || (toolCalls.length > 0 ? null : '') };
    if (toolCalls.length > 0) out.tool_calls = toolCalls;
    return [out];
  }
  // A user turn: tool results become `tool` messages (they must directly follow the assistant's tool calls),
  // the rest one user message.
  const out: ChatMessage[] = [];
  const parts: ChatContentPart[] = [];
  for (const block of message.content) {
    if (block.type === 'tool_result') {
      out.push({ role: 'tool', tool_call_id: block.tool_use_id, content: toolResultText(block, provider) });
    } else {
      parts.push(convertUserBlock(block, dialect));
    }
  }
  if (parts.length > 0) {
    const onlyText = parts.every((part) => part.type === 'text');
    out.push({
      role: 'user',
      // Separate text blocks are separate passages: joined by a newline (as vLLM joins text parts), never run together.
      content: onlyText ? parts.map((part) => (part as OpenAI.ChatCompletionContentPartText).text).join('\n') : parts,
    });
  }
  return out;
}

function toolResultText(block: Anthropic.ToolResultBlockParam, provider: string): string {
  const prefix = block.is_error ? 'Error: ' : '';
  if (block.content === undefined) return prefix;
  if (typeof block.content === 'string') return prefix + block.content;
  return (
    prefix +
    block.content
      .map((inner) => {
        if (inner.type === 'text') return inner.text;
        throw new UnsupportedParameterError(`tool_result content '${inner.type}'`, provider);
      })
      .join('\n')
  );
}

function convertUserBlock(block: Anthropic.ContentBlockParam, dialect: ChatDialect): ChatContentPart {
  const provider = dialect.provider_name;
  if (block.type === 'text') return { type: 'text', text: block.text };
  if (block.type === 'image') {
    if (!dialect.image) throw new UnsupportedParameterError('image', provider, 'The provider takes no images.');
    const source = block.source;
    if (source.type === 'base64') {
      return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` } };
    }
    if (source.type === 'url') return { type: 'image_url', image_url: { url: source.url } };
    throw new UnsupportedParameterError(`image source '${source.type}'`, provider);
  }
  if (block.type === 'document' && block.source.type === 'text') return { type: 'text', text: block.source.data };
  if (block.type === 'document' && block.source.type === 'base64' && block.source.media_type === 'application/pdf') {
    return {
      type: 'file',
      file: { file_data: `data:application/pdf;base64,${block.source.data}`, filename: block.title ?? 'document.pdf' },
    };
  }
  throw new UnsupportedParameterError(`messages content block '${block.type}'`, provider);
}
