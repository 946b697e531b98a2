// OpenAI chat completions request → Anthropic Messages request: lets `completion` run on providers that only
// implement `messages` (the core's adapter). Unhonourable parameters raise UnsupportedParameterError.

import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import { UnsupportedParameterError } from '../errors.ts';
import type { CompletionParams, MessagesParams } from '../provider.ts';
import { parseArguments } from './response-from-chat.ts';

/** Used when the chat request sets no token limit (Messages requires one). */
export const DEFAULT_MAX_TOKENS = 4096;

/** Fields many clients send at OpenAI's default value: at that value they ask for nothing, so they are not refused. */
const IGNORED_WHEN_DEFAULT: Record<string, unknown> = { n: 1, presence_penalty: 0, frequency_penalty: 0, logprobs: false };

export function chatRequestToMessages(params: CompletionParams, provider_name: string): MessagesParams {
  const p = provider_name;
  const handled = new Set([
    'model',
    'messages',
    'max_tokens',
    'max_completion_tokens',
    'temperature',
    'top_p',
    'stop',
    'tools',
    'tool_choice',
    'parallel_tool_calls',
    'user',
    'response_format',
    'reasoning_effort',
    'stream_options',
    'top_k',
  ]);
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || handled.has(key)) continue;
    if (key in IGNORED_WHEN_DEFAULT && value === IGNORED_WHEN_DEFAULT[key]) continue;
    throw new UnsupportedParameterError(key, p);
  }
  const system: string[] = [];
  const messages: Anthropic.MessageParam[] = [];
  const push = (role: 'user' | 'assistant', blocks: Anthropic.ContentBlockParam[]) => {
    const last = messages.at(-1);
    // Messages wants alternating turns: merge consecutive same-role turns (e.g. several tool results).
    if (last && last.role === role && Array.isArray(last.content)) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  };
  for (const message of params.messages) {
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(typeof message.content === 'string' ? message.content : message.content.map((c) => c.text).join(''));
        break;
      case 'user':
        push('user', userBlocks(message.content, p));
        break;
      case 'assistant': {
        const blocks: Anthropic.ContentBlockParam[] = [];
        const content = message.content;
        if (typeof content === 'string' && content !== '') blocks.push({ type: 'text', text: content });
        else if (Array.isArray(content)) {
          for (const part of content) {
            if (part.type === 'text') blocks.push({ type: 'text', text: part.text });
            else throw new UnsupportedParameterError(`assistant content '${part.type}'`, p);
          }
        }
        for (const call of message.tool_calls ?? []) {
          if (call.type !== 'function') throw new UnsupportedParameterError(`tool call '${call.type}'`, p);
          blocks.push({ type: 'tool_use', id: call.id, name: call.function.name, input: parseArguments(call.function.arguments) });
        }
        push('assistant', blocks);
        break;
      }
      case 'tool':
        push('user', [
          {
            type: 'tool_result',
            tool_use_id: message.tool_call_id,
            content: typeof message.content === 'string' ? message.content : message.content.map((c) => c.text).join(''),
          },
        ]);
        break;
      default:
        throw new UnsupportedParameterError(`message role '${message.role}'`, p);
    }
  }
  const out: MessagesParams = {
    model: params.model,
    messages,
    max_tokens: params.max_completion_tokens ?? params.max_tokens ?? DEFAULT_MAX_TOKENS,
  };
  if (system.length > 0) out.system = system.join('\n');
  if (params.temperature != null) out.temperature = params.temperature;
  if (params.top_p != null) out.top_p = params.top_p;
  const topK = (params as { top_k?: number }).top_k;
  if (topK != null) out.top_k = topK;
  if (params.stop != null) out.stop_sequences = typeof params.stop === 'string' ? [params.stop] : params.stop;
  if (params.user != null) out.metadata = { user_id: params.user };
  if (params.tools) {
    out.tools = params.tools.map((tool) => {
      if (tool.type !== 'function') throw new UnsupportedParameterError(`tool type '${tool.type}'`, p);
      const t: Anthropic.Tool = {
        name: tool.function.name,
        input_schema: (tool.function.parameters ?? { type: 'object', properties: {} }) as Anthropic.Tool.InputSchema,
      };
      if (tool.function.description !== undefined) t.description = tool.function.description;
      return t;
    });
  }
  const disableParallel = params.parallel_tool_calls === false;
  if (params.tool_choice != null) {
    const choice = params.tool_choice;
    if (choice === 'auto') out.tool_choice = { type: 'auto', disable_parallel_tool_use: disableParallel };
    else if (choice === 'required') out.tool_choice = { type: 'any', disable_parallel_tool_use: disableParallel };
    else if (choice === 'none') out.tool_choice = { type: 'none' };
    else if (choice.type === 'function') {
      out.tool_choice = { type: 'tool', name: choice.function.name, disable_parallel_tool_use: disableParallel };
    } else throw new UnsupportedParameterError(`tool_choice '${choice.type}'`, p);
  } else if (disableParallel && out.tools) {
    out.tool_choice = { type: 'auto', disable_parallel_tool_use: true };
  }
  if (params.response_format != null) {
    const format = params.response_format;
    if (format.type === 'json_schema') {
      out.output_config = { format: { type: 'json_schema', schema: (format.json_schema.schema ?? {}) as Record<string, unknown> } };
    } else if (format.type !== 'text') {
      throw new UnsupportedParameterError(`response_format '${format.type}'`, p);
    }
  }
  if (params.reasoning_effort != null && params.reasoning_effort !== 'none') {
    const budget = { minimal: 1024, low: 2048, medium: 8192, high: 24576, xhigh: 32768 }[params.reasoning_effort as string] ?? 8192;
    out.thinking = { type: 'enabled', budget_tokens: budget };
  }
  return out;
}

function userBlocks(
  content: string | OpenAI.ChatCompletionContentPart[],
  provider: string,
): Anthropic.ContentBlockParam[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return content.map((part): Anthropic.ContentBlockParam => {
    if (part.type === 'text') return { type: 'text', text: part.text };
    if (part.type === 'image_url') {
      const url = part.image_url.url;
      const data = /^data:([^;,]+);base64,(.*)$/s.exec(url);
      if (data) {
        return {
          type: 'image',
          source: { type: 'base64', media_type: data[1] as Anthropic.Base64ImageSource['media_type'], data: data[2]! },
        };
      }
      return { type: 'image', source: { type: 'url', url } };
    }
    if (part.type === 'file' && part.file.file_data) {
      const data = /^data:application\/pdf;base64,(.*)$/s.exec(part.file.file_data);
      if (data) return { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: data[1]! } };
    }
    throw new UnsupportedParameterError(`content part '${part.type}'`, provider);
  });
}
