// Messages (Anthropic format) ⇄ Cohere Chat API v2, in the cohere-ai SDK's (camelCase) shapes.

import type Anthropic from '@anthropic-ai/sdk';
import type { Cohere } from 'cohere-ai';
import { InvalidRequestError, ProviderError, UnsupportedParameterError } from '../../errors.ts';
import type { MessagesParams, MessagesResponse, MessagesStreamEvent } from '../../provider.ts';
import { functionTool, outputSchema, rejectUnhandledParameters, toolOutput, toRoleMessages } from '../../message-format/request.ts';
import { generateId, messageUsage, newMessage, parseToolArguments, textBlock, thinkingBlock, toolUseBlock, type UsageCounts } from '../../message-format/response.ts';
import { incompleteStreamError, MessageStreamBuilder } from '../../message-format/stream-builder.ts';

const PROVIDER = 'cohere';
const HANDLED = ['system', 'temperature', 'top_p', 'top_k', 'stop_sequences', 'tools', 'tool_choice', 'thinking', 'output_config'];

export function toCohereRequest(params: MessagesParams, extra: Record<string, unknown> = {}): Cohere.V2ChatRequest {
  rejectUnhandledParameters(params, HANDLED, PROVIDER);
  const request: Cohere.V2ChatRequest = { model: params.model, maxTokens: params.max_tokens, messages: toMessages(params) };
  if (params.temperature !== undefined) request.temperature = params.temperature;
  if (params.top_p !== undefined) request.p = params.top_p;
  if (params.top_k !== undefined) request.k = params.top_k;
  if (params.stop_sequences?.length) request.stopSequences = params.stop_sequences;
  let tools = params.tools ?? [];
  const choice = params.tool_choice;
  if (choice) {
    if (choice.type !== 'none' && choice.disable_parallel_tool_use) {
      throw new UnsupportedParameterError('tool_choice.disable_parallel_tool_use', PROVIDER, 'Cohere decides on parallel tool calls itself');
    }
    if (choice.type === 'any') request.toolChoice = 'REQUIRED';
    else if (choice.type === 'none') request.toolChoice = 'NONE';
    else if (choice.type === 'tool') {
      // Cohere cannot name the tool to call: offering only that tool and requiring a call is the same thing
      tools = tools.filter((tool) => 'name' in tool && tool.name === choice.name);
      if (tools.length === 0) throw new InvalidRequestError(`tool_choice names ${choice.name}, which is not in tools`, null, PROVIDER, { param: 'tool_choice' });
      request.toolChoice = 'REQUIRED';
    }
  }
  if (tools.length > 0) {
    request.tools = tools.map((tool) => {
      const fn = functionTool(tool, PROVIDER);
      return { type: 'function' as const, function: { name: fn.name, ...(fn.description !== undefined ? { description: fn.description } : {}), parameters: fn.parameters } };
    });
  }
  if (params.thinking) {
    const thinking = params.thinking;
    if (thinking.type === 'enabled') request.thinking = { type: 'enabled', tokenBudget: thinking.budget_tokens };
    else if (thinking.type === 'adaptive') request.thinking = { type: 'enabled' };
    else if (thinking.type === 'disabled') request.thinking = { type: 'disabled' };
    else throw new UnsupportedParameterError(`thinking.type=${thinking.type}`, PROVIDER);
  }
  const schema = outputSchema(params.output_config, PROVIDER);
  if (schema) request.responseFormat = { type: 'json_object', jsonSchema: schema };
  return { ...request, ...extra };
}

function toMessages(params: MessagesParams): Cohere.ChatMessageV2[] {
  return toRoleMessages<Cohere.ChatMessageV2, Cohere.Content>(params, PROVIDER, {
    system: (text) => ({ role: 'system', content: text }),
    assistant: toAssistantMessage,
    toolResult: (block) => ({ role: 'tool', toolCallId: block.tool_use_id, content: toolOutput(block, PROVIDER) }),
    userPart: toUserContent,
    user: (content) => ({ role: 'user', content }),
  });
}

function toUserContent(block: Anthropic.ContentBlockParam): Cohere.Content {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text };
    case 'image':
      if (block.source.type === 'base64') return { type: 'image_url', imageUrl: { url: `data:${block.source.media_type};base64,${block.source.data}` } };
      if (block.source.type === 'url') return { type: 'image_url', imageUrl: { url: block.source.url } };
      throw new UnsupportedParameterError(`image source ${block.source.type}`, PROVIDER);
    case 'document':
      if (block.source.type === 'text') return { type: 'text', text: block.source.data };
      throw new UnsupportedParameterError(`document source ${block.source.type}`, PROVIDER);
    default:
      throw new UnsupportedParameterError(`content block ${block.type}`, PROVIDER);
  }
}

/** With tool calls, the assistant's text is Cohere's tool plan (the text it wrote before calling the tools). */
function toAssistantMessage(blocks: Anthropic.ContentBlockParam[]): Cohere.ChatMessageV2 {
  const content: Cohere.AssistantMessageV2ContentOneItem[] = [];
  const toolCalls: Cohere.ToolCallV2[] = [];
  for (const block of blocks) {
    if (block.type === 'text') content.push({ type: 'text', text: block.text });
    else if (block.type === 'thinking') content.push({ type: 'thinking', thinking: block.thinking });
    else if (block.type === 'tool_use') toolCalls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
    else throw new UnsupportedParameterError(`content block ${block.type} in an assistant message`, PROVIDER);
  }
  if (toolCalls.length === 0) return { role: 'assistant', content };
  const plan = content.flatMap((item) => (item.type === 'text' ? [item.text] : [])).join('\n');
  const thinking = content.filter((item) => item.type === 'thinking');
  return { role: 'assistant', toolCalls, ...(plan ? { toolPlan: plan } : {}), ...(thinking.length > 0 ? { content: thinking } : {}) };
}

export function toStopReason(finish: string | undefined): Anthropic.StopReason | null {
  switch (finish) {
    case 'COMPLETE':
      return 'end_turn';
    case 'STOP_SEQUENCE':
      return 'stop_sequence';
    case 'MAX_TOKENS':
      return 'max_tokens';
    case 'TOOL_CALL':
      return 'tool_use';
    case 'ERROR':
    case 'TIMEOUT':
      throw new ProviderError(`The model stopped with finish_reason ${finish}`, null, PROVIDER);
    case undefined:
      return null;
    default:
      return 'end_turn';
  }
}

/** Token counts (not billed units) when reported; cached prompt tokens are split from input. */
export function toUsageCounts(usage: Cohere.Usage | undefined): UsageCounts {
  const cached = usage?.cachedTokens ?? null;
  const input = usage?.tokens?.inputTokens ?? usage?.billedUnits?.inputTokens ?? 0;
  const output = usage?.tokens?.outputTokens ?? usage?.billedUnits?.outputTokens ?? 0;
  return { input: input - (cached ?? 0), output, cacheRead: cached };
}

export function fromCohereResponse(response: Cohere.V2ChatResponse, model: string): MessagesResponse {
  const content: Anthropic.ContentBlock[] = [];
  for (const item of response.message.content ?? []) {
    if (item.type === 'thinking') content.push(thinkingBlock(item.thinking));
    else if (item.type === 'text') content.push(textBlock(item.text));
  }
  if (response.message.toolPlan) content.push(textBlock(response.message.toolPlan));
  for (const call of response.message.toolCalls ?? []) {
    content.push(toolUseBlock(call.id, call.function?.name ?? '', parseToolArguments(call.function?.arguments, PROVIDER)));
  }
  return newMessage({ id: response.id, model, content, stop_reason: toStopReason(response.finishReason), usage: messageUsage(toUsageCounts(response.usage)) });
}

/** Cohere v2 stream events (message-start … message-end) → Messages stream events. */
export async function* fromCohereStream(events: AsyncIterable<Cohere.V2ChatStreamResponse>, model: string): AsyncIterable<MessagesStreamEvent> {
  const builder = new MessageStreamBuilder(model);
  let ended = false;
  for await (const event of events) {
    switch (event.type) {
      case 'message-start':
        yield* builder.start({}, event.id);
        break;
      case 'content-start':
      case 'content-delta': {
        const content = event.delta?.message?.content;
        if (content?.thinking) yield* builder.thinking(content.thinking);
        if (content?.text) yield* builder.text(content.text);
        break;
      }
      case 'tool-plan-delta':
        yield* builder.text(event.delta?.message?.toolPlan ?? '');
        break;
      case 'tool-call-start': {
        const call = event.delta?.message?.toolCalls;
        const key = `call-${event.index ?? 0}`;
        yield* builder.toolUse(key, call?.id ?? generateId('toolu'), call?.function?.name ?? '');
        yield* builder.toolInput(key, call?.function?.arguments ?? '');
        break;
      }
      case 'tool-call-delta':
        yield* builder.toolInput(`call-${event.index ?? 0}`, event.delta?.message?.toolCalls?.function?.arguments ?? '');
        break;
      case 'message-end': {
        const delta = event.delta;
        if (delta?.error) throw new ProviderError(delta.error, null, PROVIDER);
        ended = true;
        yield* builder.finish(toStopReason(delta?.finishReason), toUsageCounts(delta?.usage));
        break;
      }
      default:
        break;
    }
  }
  if (!ended) throw incompleteStreamError(PROVIDER);
}
