// Messages (Anthropic format) ⇄ Ollama /api/chat, in the ollama SDK's shapes.

import type Anthropic from '@anthropic-ai/sdk';
import type { ChatRequest, ChatResponse, Message, Options } from 'ollama';
import { HubError, InvalidRequestError, ProviderError, UnsupportedParameterError } from '../../errors.ts';
import { isAbortError, isNetworkError } from '../shared/error-body.ts';
import type { MessagesParams, MessagesResponse, MessagesStreamEvent } from '../../provider.ts';
import { contentBlocks, functionTool, outputSchema, rejectUnhandledParameters, systemText, toolNamesById, toolOutput } from '../../message-format/request.ts';
import { generateId, messageUsage, newMessage, textBlock, thinkingBlock, toolUseBlock, type UsageCounts } from '../../message-format/response.ts';
import { incompleteStreamError, MessageStreamBuilder } from '../../message-format/stream-builder.ts';

const PROVIDER = 'ollama';
const HANDLED = ['system', 'temperature', 'top_p', 'top_k', 'stop_sequences', 'tools', 'tool_choice', 'thinking', 'output_config'];

/** `extra.options` is merged into the model options; other extra keys (keep_alive, …) go on the request. */
export function toOllamaRequest(params: MessagesParams, extra: Record<string, unknown> = {}): ChatRequest {
  rejectUnhandledParameters(params, HANDLED, PROVIDER);
  const { options: extraOptions, ...rest } = extra as { options?: Partial<Options> };
  const options: Partial<Options> = { num_predict: params.max_tokens };
  if (params.temperature !== undefined) options.temperature = params.temperature;
  if (params.top_p !== undefined) options.top_p = params.top_p;
  if (params.top_k !== undefined) options.top_k = params.top_k;
  if (params.stop_sequences?.length) options.stop = params.stop_sequences;
  const request: ChatRequest = { model: params.model, messages: toMessages(params), options: { ...options, ...extraOptions } };

  const choice = params.tool_choice;
  if (choice && choice.type !== 'none' && choice.disable_parallel_tool_use) {
    throw new UnsupportedParameterError('tool_choice.disable_parallel_tool_use', PROVIDER, 'Ollama has no control over parallel tool calls');
  }
  if (choice && (choice.type === 'any' || choice.type === 'tool')) {
    throw new UnsupportedParameterError(`tool_choice.type=${choice.type}`, PROVIDER, 'Ollama cannot force a tool call; use auto or none');
  }
  // tool_choice none is honoured by not offering the tools
  if (params.tools?.length && choice?.type !== 'none') {
    request.tools = params.tools.map((tool) => {
      const fn = functionTool(tool, PROVIDER);
      return { type: 'function', function: { name: fn.name, ...(fn.description !== undefined ? { description: fn.description } : {}), parameters: fn.parameters } };
    });
  }
  if (params.thinking) {
    // Ollama switches thinking on or off; it does not bound it by a token budget
    if (params.thinking.type === 'enabled' || params.thinking.type === 'adaptive') request.think = true;
    else if (params.thinking.type === 'disabled') request.think = false;
    else throw new UnsupportedParameterError(`thinking.type=${params.thinking.type}`, PROVIDER);
  }
  const schema = outputSchema(params.output_config, PROVIDER);
  if (schema) request.format = schema;
  return { ...request, ...rest };
}

function toMessages(params: MessagesParams): Message[] {
  const messages: Message[] = [];
  const system = systemText(params.system);
  if (system !== undefined) messages.push({ role: 'system', content: system });
  const names = toolNamesById(params.messages);
  for (const message of params.messages) {
    const texts: string[] = [];
    const images: string[] = [];
    let thinking = '';
    const toolCalls: NonNullable<Message['tool_calls']> = [];
    for (const block of contentBlocks(message.content, PROVIDER)) {
      switch (block.type) {
        case 'text':
          texts.push(block.text);
          break;
        case 'image':
          if (block.source.type !== 'base64') throw new UnsupportedParameterError(`image source ${block.source.type}`, PROVIDER, 'Ollama takes images as base64 data');
          images.push(block.source.data);
          break;
        case 'document':
          if (block.source.type !== 'text') throw new UnsupportedParameterError(`document source ${block.source.type}`, PROVIDER);
          texts.push(block.source.data);
          break;
        case 'thinking':
          thinking += block.thinking;
          break;
        case 'tool_use':
          toolCalls.push({ function: { name: block.name, arguments: (block.input ?? {}) as Record<string, unknown> } });
          break;
        case 'tool_result': {
          const name = names.get(block.tool_use_id);
          if (name === undefined) throw new InvalidRequestError(`tool_result ${block.tool_use_id} answers no tool_use in the conversation`, null, PROVIDER, { param: 'messages' });
          messages.push({ role: 'tool', content: toolOutput(block, PROVIDER), tool_name: name });
          break;
        }
        default:
          throw new UnsupportedParameterError(`content block ${block.type}`, PROVIDER);
      }
    }
    const hasContent = texts.length > 0 || images.length > 0 || thinking !== '' || toolCalls.length > 0;
    if (!hasContent && typeof message.content !== 'string') continue;
    messages.push({
      role: message.role,
      content: texts.join('\n'),
      ...(images.length > 0 ? { images } : {}),
      ...(thinking ? { thinking } : {}),
      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
    });
  }
  return messages;
}

export function toStopReason(doneReason: string | undefined, hasToolUse: boolean): Anthropic.StopReason {
  if (doneReason === 'length') return 'max_tokens';
  return hasToolUse ? 'tool_use' : 'end_turn';
}

export function toUsageCounts(response: Partial<ChatResponse>): UsageCounts {
  return { input: response.prompt_eval_count ?? 0, output: response.eval_count ?? 0 };
}

export function fromOllamaResponse(response: ChatResponse): MessagesResponse {
  const content: Anthropic.ContentBlock[] = [];
  if (response.message.thinking) content.push(thinkingBlock(response.message.thinking));
  if (response.message.content) content.push(textBlock(response.message.content));
  for (const call of response.message.tool_calls ?? []) content.push(toolUseBlock(generateId('toolu'), call.function.name, call.function.arguments ?? {}));
  return newMessage({
    model: response.model,
    content,
    stop_reason: toStopReason(response.done_reason, content.some((b) => b.type === 'tool_use')),
    usage: messageUsage(toUsageCounts(response)),
  });
}

/** Ollama's NDJSON chunks (done: false … done: true) → Messages stream events. */
export async function* fromOllamaStream(chunks: AsyncIterable<ChatResponse>, model: string): AsyncIterable<MessagesStreamEvent> {
  const builder = new MessageStreamBuilder(model);
  let toolCalls = 0;
  for await (const chunk of streamErrorsAsProviderErrors(chunks)) {
    yield* builder.start();
    if (chunk.message?.thinking) yield* builder.thinking(chunk.message.thinking);
    if (chunk.message?.content) yield* builder.text(chunk.message.content);
    for (const call of chunk.message?.tool_calls ?? []) {
      const key = `call-${toolCalls++}`;
      yield* builder.toolUse(key, generateId('toolu'), call.function.name);
      yield* builder.toolInput(key, JSON.stringify(call.function.arguments ?? {}));
    }
    if (chunk.done) {
      yield* builder.finish(toStopReason(chunk.done_reason, toolCalls > 0), toUsageCounts(chunk));
      return;
    }
  }
  throw incompleteStreamError(PROVIDER);
}

/**
 * The SDK reports an {"error": …} line inside the stream, and a stream that ends without done, as plain Errors:
 * both are the server's failure.
 */
async function* streamErrorsAsProviderErrors<T>(chunks: AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* chunks;
  } catch (error) {
    if (error instanceof HubError || isAbortError(error) || isNetworkError(error) || !(error instanceof Error) || error.name === 'ResponseError') throw error;
    throw new ProviderError(error.message, error, PROVIDER);
  }
}
