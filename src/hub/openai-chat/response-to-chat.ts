// Anthropic Message (and its stream events) → OpenAI chat completion (and chunks): the response half of the
// core's completion adapter for providers that only implement `messages`.

import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';

type FinishReason = OpenAI.ChatCompletion.Choice['finish_reason'];

function finishFromStopReason(reason: Anthropic.StopReason | null): FinishReason {
  switch (reason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop';
  }
}

/**
 * Anthropic usage → OpenAI usage: prompt tokens include cached reads and cache writes. OpenAI's usage has no field
 * for cache writes (which cost more than input), so they are also given as `cache_creation_input_tokens`, the name
 * LiteLLM uses, when there are any.
 */
function usageFromMessage(usage: Partial<Anthropic.Usage> | Anthropic.MessageDeltaUsage): OpenAI.CompletionUsage {
  const cacheRead = usage.cache_read_input_tokens ?? 0;
  const cacheWrite = usage.cache_creation_input_tokens ?? 0;
  const prompt = (usage.input_tokens ?? 0) + cacheRead + cacheWrite;
  const completion = usage.output_tokens ?? 0;
  const out: OpenAI.CompletionUsage & { cache_creation_input_tokens?: number } = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cacheRead },
  };
  if (cacheWrite > 0) out.cache_creation_input_tokens = cacheWrite;
  const thinking = usage.output_tokens_details?.thinking_tokens;
  if (thinking !== undefined) out.completion_tokens_details = { reasoning_tokens: thinking };
  return out;
}

export function messageToChatCompletion(message: Anthropic.Message): OpenAI.ChatCompletion {
  let text = '';
  let reasoning = '';
  const toolCalls: OpenAI.ChatCompletionMessageFunctionToolCall[] = [];
  for (const block of message.content) {
    if (block.type === 'text') text += block.text;
    else if (block.type === 'thinking') reasoning += block.thinking;
    else if (block.type === 'tool_use') {
      toolCalls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
    }
  }
  const chatMessage: OpenAI.ChatCompletionMessage & { reasoning_content?: string } = {
    role: 'assistant',
    content: text === '' && toolCalls.length > 0 ? null : text,
    refusal: null,
  };
  if (toolCalls.length > 0) chatMessage.tool_calls = toolCalls;
  if (reasoning !== '') chatMessage.reasoning_content = reasoning;
  return {
    id: message.id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: message.model,
    choices: [{ index: 0, message: chatMessage, finish_reason: finishFromStopReason(message.stop_reason), logprobs: null }],
    usage: usageFromMessage(message.usage),
  };
}

/** Messages stream events → chat completion chunks (the last chunk carries finish_reason and usage). */
export async function* messageEventsToChatChunks(
  events: AsyncIterable<Anthropic.RawMessageStreamEvent>,
): AsyncGenerator<OpenAI.ChatCompletionChunk> {
  let id = '';
  let model = '';
  const created = Math.floor(Date.now() / 1000);
  let inputUsage: Partial<Anthropic.Usage> = {};
  const toolIndexByBlock = new Map<number, number>();
  const chunk = (delta: OpenAI.ChatCompletionChunk.Choice.Delta, finish: FinishReason | null = null): OpenAI.ChatCompletionChunk => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
  });
  for await (const event of events) {
    switch (event.type) {
      case 'message_start':
        id = event.message.id;
        model = event.message.model;
        inputUsage = event.message.usage;
        yield chunk({ role: 'assistant', content: '' });
        break;
      case 'content_block_start':
        if (event.content_block.type === 'tool_use') {
          const toolIndex = toolIndexByBlock.size;
          toolIndexByBlock.set(event.index, toolIndex);
          yield chunk({
            tool_calls: [
              { index: toolIndex, id: event.content_block.id, type: 'function', function: { name: event.content_block.name, arguments: '' } },
            ],
          });
        }
        break;
      case 'content_block_delta':
        if (event.delta.type === 'text_delta') yield chunk({ content: event.delta.text });
        else if (event.delta.type === 'thinking_delta') {
          yield chunk({ reasoning_content: event.delta.thinking } as OpenAI.ChatCompletionChunk.Choice.Delta);
        } else if (event.delta.type === 'input_json_delta') {
          yield chunk({
            tool_calls: [{ index: toolIndexByBlock.get(event.index) ?? 0, function: { arguments: event.delta.partial_json } }],
          });
        }
        break;
      case 'message_delta': {
        const final = chunk({}, finishFromStopReason(event.delta.stop_reason));
        final.usage = usageFromMessage({
          input_tokens: event.usage.input_tokens ?? inputUsage.input_tokens ?? 0,
          cache_read_input_tokens: event.usage.cache_read_input_tokens ?? inputUsage.cache_read_input_tokens ?? 0,
          cache_creation_input_tokens: event.usage.cache_creation_input_tokens ?? inputUsage.cache_creation_input_tokens ?? 0,
          output_tokens: event.usage.output_tokens,
          output_tokens_details: event.usage.output_tokens_details,
        });
        yield final;
        break;
      }
      default:
        break;
    }
  }
}
