// Messages (Anthropic format) ⇄ Mistral chat completions, in the @mistralai/mistralai SDK's (camelCase) shapes.

import { createHash } from 'node:crypto';
import type Anthropic from '@anthropic-ai/sdk';
import type * as components from '@mistralai/mistralai/models/components';
import { ProviderError, UnsupportedParameterError } from '../../errors.ts';
import type { MessagesParams, MessagesResponse, MessagesStreamEvent } from '../../provider.ts';
import { functionTool, outputSchema, rejectUnhandledParameters, rejectUnknownExtra, toolOutput, toRoleMessages } from '../../message-format/request.ts';
import { generateId, messageUsage, newMessage, parseToolArguments, textBlock, thinkingBlock, toolUseBlock, type UsageCounts } from '../../message-format/response.ts';
import { incompleteStreamError, MessageStreamBuilder } from '../../message-format/stream-builder.ts';

const PROVIDER = 'mistral';
const HANDLED = ['system', 'temperature', 'top_p', 'stop_sequences', 'tools', 'tool_choice', 'thinking', 'metadata', 'output_config'];

type MistralMessage = components.ChatCompletionRequest['messages'][number];

/** ChatCompletionRequest fields a caller may pass as extra options (the SDK drops unknown ones silently). */
const MISTRAL_CHAT_OPTIONS = [
  'randomSeed',
  'responseFormat',
  'presencePenalty',
  'frequencyPenalty',
  'n',
  'prediction',
  'parallelToolCalls',
  'reasoningEffort',
  'promptMode',
  'guardrails',
  'promptCacheKey',
  'serviceTier',
  'safePrompt',
] as const satisfies readonly (keyof components.ChatCompletionRequest)[];
type Chunk = components.ContentChunk;

/**
 * Mistral accepts only tool call ids of 9 letters and digits. Its own ids pass unchanged; any other id (e.g. an
 * Anthropic toolu_… id) is replaced by a stable 9-character digest, the same for the call and its result.
 */
export function mistralToolCallId(id: string): string {
  if (/^[a-zA-Z0-9]{9}$/.test(id)) return id;
  return createHash('sha256').update(id).digest('base64').replace(/[^a-zA-Z0-9]/g, '').slice(0, 9);
}

export function toMistralRequest(params: MessagesParams, extra: Record<string, unknown> = {}): components.ChatCompletionRequest {
  rejectUnhandledParameters(params, HANDLED, PROVIDER);
  rejectUnknownExtra(extra, MISTRAL_CHAT_OPTIONS, PROVIDER);
  if (params.top_k !== undefined && params.top_k !== null) throw new UnsupportedParameterError('top_k', PROVIDER);
  const request: components.ChatCompletionRequest = { model: params.model, maxTokens: params.max_tokens, messages: toMessages(params) };
  if (params.temperature !== undefined) request.temperature = params.temperature;
  if (params.top_p !== undefined) request.topP = params.top_p;
  if (params.stop_sequences?.length) request.stop = params.stop_sequences;
  if (params.metadata) request.metadata = { ...params.metadata };
  if (params.tools?.length) {
    request.tools = params.tools.map((tool) => {
      const fn = functionTool(tool, PROVIDER);
      return { type: 'function' as const, function: { name: fn.name, ...(fn.description !== undefined ? { description: fn.description } : {}), parameters: fn.parameters } };
    });
  }
  if (params.tool_choice) {
    const choice = params.tool_choice;
    request.toolChoice = choice.type === 'tool' ? { type: 'function', function: { name: choice.name } } : choice.type;
    if (choice.type !== 'none' && choice.disable_parallel_tool_use) request.parallelToolCalls = false;
  }
  if (params.thinking) {
    // Mistral's reasoning models think when asked through the reasoning prompt mode; a token budget is not enforced.
    if (params.thinking.type === 'enabled' || params.thinking.type === 'adaptive') request.promptMode = 'reasoning';
    else if (params.thinking.type !== 'disabled') throw new UnsupportedParameterError(`thinking.type=${params.thinking.type}`, PROVIDER);
  }
  const schema = outputSchema(params.output_config, PROVIDER);
  if (schema) request.responseFormat = { type: 'json_schema', jsonSchema: { name: 'output', schemaDefinition: schema, strict: true } };
  return { ...request, ...extra };
}

function toMessages(params: MessagesParams): MistralMessage[] {
  return toRoleMessages<MistralMessage, Chunk>(params, PROVIDER, {
    system: (text) => ({ role: 'system', content: text }),
    assistant: toAssistantMessage,
    toolResult: (block, name) => ({ role: 'tool', toolCallId: mistralToolCallId(block.tool_use_id), name, content: toolOutput(block, PROVIDER) }),
    userPart: toUserChunk,
    user: (content) => ({ role: 'user', content }),
  });
}

function toUserChunk(block: Anthropic.ContentBlockParam): Chunk {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text };
    case 'image':
      if (block.source.type === 'base64') return { type: 'image_url', imageUrl: `data:${block.source.media_type};base64,${block.source.data}` };
      if (block.source.type === 'url') return { type: 'image_url', imageUrl: block.source.url };
      throw new UnsupportedParameterError(`image source ${block.source.type}`, PROVIDER);
    case 'document':
      if (block.source.type === 'url') return { type: 'document_url', documentUrl: block.source.url };
      if (block.source.type === 'text') return { type: 'text', text: block.source.data };
      throw new UnsupportedParameterError(`document source ${block.source.type}`, PROVIDER, 'Mistral reads documents from a URL');
    default:
      throw new UnsupportedParameterError(`content block ${block.type}`, PROVIDER);
  }
}

function toAssistantMessage(blocks: Anthropic.ContentBlockParam[]): MistralMessage {
  const chunks: Chunk[] = [];
  const toolCalls: components.ToolCall[] = [];
  for (const block of blocks) {
    if (block.type === 'text') chunks.push({ type: 'text', text: block.text });
    else if (block.type === 'thinking') chunks.push({ type: 'thinking', thinking: [{ type: 'text', text: block.thinking }], ...(block.signature ? { signature: block.signature } : {}) });
    else if (block.type === 'tool_use') {
      toolCalls.push({ id: mistralToolCallId(block.id), type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
    } else throw new UnsupportedParameterError(`content block ${block.type} in an assistant message`, PROVIDER);
  }
  const content = chunks.length === 0 ? '' : chunks.length === 1 && chunks[0].type === 'text' ? chunks[0].text : chunks;
  return { role: 'assistant', content, ...(toolCalls.length > 0 ? { toolCalls } : {}) };
}

/** finishReason → stop_reason; "error" is the provider's failure. */
export function toStopReason(finish: string | null | undefined, hasToolUse: boolean): Anthropic.StopReason | null {
  switch (finish) {
    case 'stop':
      return hasToolUse ? 'tool_use' : 'end_turn';
    case 'length':
    case 'model_length':
      return 'max_tokens';
    case 'tool_calls':
      return 'tool_use';
    case 'error':
      throw new ProviderError('The model stopped with an error (finish_reason "error")', null, PROVIDER);
    case null:
    case undefined:
      return null;
    default:
      return 'end_turn';
  }
}

/** Cached prompt tokens are reported as prompt_tokens_details.cached_tokens (kept raw by the SDK) or num_cached_tokens. */
export function toUsageCounts(usage: components.UsageInfo | undefined): UsageCounts {
  const raw = (usage ?? {}) as Record<string, unknown>;
  const details = (raw.prompt_tokens_details ?? raw.promptTokensDetails) as { cached_tokens?: number; cachedTokens?: number } | undefined;
  const cached = details?.cached_tokens ?? details?.cachedTokens ?? (raw.num_cached_tokens as number | undefined) ?? null;
  return { input: (usage?.promptTokens ?? 0) - (cached ?? 0), output: usage?.completionTokens ?? 0, cacheRead: cached };
}

function chunkText(chunks: components.ThinkChunk['thinking']): string {
  return chunks.map((c) => ('text' in c ? c.text : '')).join('');
}

export function fromMistralResponse(response: components.ChatCompletionResponse, model: string): MessagesResponse {
  const choice = response.choices[0];
  const content: Anthropic.ContentBlock[] = [];
  const message = choice?.message;
  if (typeof message?.content === 'string') {
    if (message.content !== '') content.push(textBlock(message.content));
  } else {
    for (const chunk of message?.content ?? []) {
      if (chunk.type === 'text') content.push(textBlock(chunk.text));
      else if (chunk.type === 'thinking') content.push(thinkingBlock(chunkText(chunk.thinking), chunk.signature ?? ''));
    }
  }
  for (const call of message?.toolCalls ?? []) {
    const input = typeof call.function.arguments === 'string' ? parseToolArguments(call.function.arguments, PROVIDER) : call.function.arguments;
    content.push(toolUseBlock(call.id ?? generateId('toolu'), call.function.name, input));
  }
  return newMessage({
    id: response.id,
    model: response.model ?? model,
    content,
    stop_reason: toStopReason(choice?.finishReason, content.some((b) => b.type === 'tool_use')),
    usage: messageUsage(toUsageCounts(response.usage)),
  });
}

/** Mistral's SSE chunks (OpenAI-like deltas, camelCased by the SDK) → Messages stream events. */
export async function* fromMistralStream(events: AsyncIterable<components.CompletionEvent>, model: string): AsyncIterable<MessagesStreamEvent> {
  const builder = new MessageStreamBuilder(model);
  let finish: string | null | undefined;
  let usage: components.UsageInfo | undefined;
  let toolCalls = 0;
  // Per index, the builder key and the vendor id of the call streaming there.
  const openCalls = new Map<number, { key: string; id: string | undefined }>();
  for await (const { data: chunk } of events) {
    yield* builder.start({}, chunk.id);
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    const delta = choice.delta;
    if (typeof delta.content === 'string') yield* builder.text(delta.content);
    else {
      for (const part of delta.content ?? []) {
        if (part.type === 'text') yield* builder.text(part.text);
        else if (part.type === 'thinking') {
          yield* builder.thinking(chunkText(part.thinking));
          if (part.signature) yield* builder.signature(part.signature);
        }
      }
    }
    for (const call of delta.toolCalls ?? []) {
      // The SDK makes a missing index 0, so parallel calls sent without one share it: a new id is a new call.
      // A fragment without an id gets the id "null" from the SDK.
      const index = call.index ?? toolCalls;
      const id = call.id && call.id !== 'null' ? call.id : undefined;
      let open = openCalls.get(index);
      if (open === undefined || (id !== undefined && id !== open.id)) {
        open = { key: `call-${toolCalls}`, id };
        openCalls.set(index, open);
        toolCalls += 1;
        yield* builder.toolUse(open.key, id ?? generateId('toolu'), call.function.name);
      }
      const args = call.function.arguments;
      yield* builder.toolInput(open.key, typeof args === 'string' ? args : JSON.stringify(args));
    }
    if (choice.finishReason) finish = choice.finishReason;
  }
  if (!finish) throw incompleteStreamError(PROVIDER);
  yield* builder.finish(toStopReason(finish, toolCalls > 0), toUsageCounts(usage));
}
