// OpenAI chat completion (and its chunk stream) → Anthropic Message (and its stream events).

import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import { ProviderError } from '../errors.ts';
import { incompleteStreamError } from '../message-format/stream-builder.ts';

type FinishReason = OpenAI.ChatCompletion.Choice['finish_reason'] | null;

/**
 * finish_reason → stop_reason. A `stop` caused by a stop sequence cannot be told apart in OpenAI chat. Several
 * OpenAI-compatible servers answer tool calls with `stop`; an answer with tool calls is `tool_use` (as on the
 * native providers), since agent loops run the tools only on that stop reason.
 */
function stopReasonFromFinish(reason: FinishReason | string, hasToolUse = false): Anthropic.StopReason | null {
  switch (reason) {
    case 'stop':
      return hasToolUse ? 'tool_use' : 'end_turn';
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    case null:
    case undefined:
      return null;
    default:
      return 'end_turn';
  }
}

/**
 * Gives a usage that reports cache hits only in DeepSeek's own field (`prompt_cache_hit_tokens`) the OpenAI field
 * `prompt_tokens_details.cached_tokens` too, so callers (and the Messages conversion) see cached tokens as cached.
 */
export function withCachedTokens<U extends OpenAI.CompletionUsage | null | undefined>(usage: U): U {
  const hit = (usage as { prompt_cache_hit_tokens?: unknown } | null | undefined)?.prompt_cache_hit_tokens;
  if (!usage || typeof hit !== 'number' || usage.prompt_tokens_details?.cached_tokens != null) return usage;
  usage.prompt_tokens_details = { ...usage.prompt_tokens_details, cached_tokens: hit };
  return usage;
}

/** OpenAI usage → Anthropic usage: cached prompt tokens become cache_read_input_tokens and leave input_tokens. */
function usageFromChat(usage: OpenAI.CompletionUsage | null | undefined): Anthropic.Usage {
  const cached = withCachedTokens(usage)?.prompt_tokens_details?.cached_tokens ?? 0;
  const reasoning = usage?.completion_tokens_details?.reasoning_tokens;
  return {
    cache_creation: null,
    cache_creation_input_tokens: null,
    cache_read_input_tokens: usage ? cached : null,
    inference_geo: null,
    input_tokens: Math.max(0, (usage?.prompt_tokens ?? 0) - cached),
    output_tokens: usage?.completion_tokens ?? 0,
    output_tokens_details: reasoning !== undefined ? { thinking_tokens: reasoning } : null,
    server_tool_use: null,
    service_tier: null,
    speed: null,
  };
}

/** Reasoning text some OpenAI-compatible services return beside the content (DeepSeek, Groq, vLLM, OpenRouter). */
function reasoningOf(message: object): string | undefined {
  const value = (message as { reasoning_content?: unknown; reasoning?: unknown }).reasoning_content ??
    (message as { reasoning?: unknown }).reasoning;
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** A tool call's JSON arguments as the tool_use input (either direction of the chat conversion). */
export function parseArguments(text: string): unknown {
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    // Models sometimes emit invalid JSON; keep it visible instead of failing the whole response.
    return { _raw_arguments: text };
  }
}

export function chatCompletionToMessage(completion: OpenAI.ChatCompletion, provider_name: string): Anthropic.Message {
  const choice = completion.choices[0];
  if (!choice) throw new ProviderError('The response has no choices', null, provider_name);
  const content: Anthropic.ContentBlock[] = [];
  const reasoning = reasoningOf(choice.message);
  if (reasoning !== undefined) content.push({ type: 'thinking', thinking: reasoning, signature: '' });
  const text = choice.message.content || choice.message.refusal || null;
  if (text) content.push({ type: 'text', text, citations: null });
  for (const call of choice.message.tool_calls ?? []) {
    if (call.type !== 'function') continue;
    content.push({
      type: 'tool_use',
      id: call.id,
      name: call.function.name,
      input: parseArguments(call.function.arguments),
      caller: { type: 'direct' },
    });
  }
  return {
    id: completion.id,
    type: 'message',
    role: 'assistant',
    model: completion.model,
    content,
    container: null,
    diagnostics: null,
    stop_details: null,
    stop_reason:
      choice.message.refusal && !choice.message.content
        ? 'refusal'
        : stopReasonFromFinish(choice.finish_reason, content.some((block) => block.type === 'tool_use')),
    stop_sequence: null,
    usage: usageFromChat(completion.usage),
  };
}

/** One tool call of a stream: its arguments so far, and whether its block waits to open, is open, or has closed. */
interface StreamedCall {
  id: string | undefined;
  name: string;
  args: string;
  state: 'waiting' | 'open' | 'closed';
}

/** Arguments that already form a whole JSON value: the call can end (another call's block may open). */
function isCompleteJson(text: string): boolean {
  if (text.trim() === '') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Converts a chunk stream into Messages stream events. Blocks are opened and closed as the kind of delta changes
 * (thinking, text, each tool call), one at a time as in Anthropic's own streams. Tool call fragments are matched to
 * their call by `index` (or by a new `id` under the same index: vLLM and SGLang stream parallel calls all under
 * index 0). A call's block opens with its first fragment when no other call's block is open, or when the open call's
 * arguments are already complete JSON; otherwise (servers that interleave the fragments of parallel calls) its
 * fragments are kept and it opens, with all of them as one delta, when it can — at the latest when the stream ends.
 * A stream that ends without a finish_reason was cut: ProviderError.
 */
export async function* chatChunksToMessageEvents(
  chunks: AsyncIterable<OpenAI.ChatCompletionChunk>,
  provider_name: string,
): AsyncGenerator<Anthropic.RawMessageStreamEvent> {
  let started = false;
  let index = -1;
  // (Typed by assertion: the closures below change both, which narrowing from `null` would not see.)
  let open = null as 'text' | 'thinking' | 'tool' | null;
  let openCall = null as StreamedCall | null;
  const callsByIndex = new Map<number, StreamedCall>();
  const waiting: StreamedCall[] = [];
  // A refusal streams as `refusal` deltas: as without streaming, refusal text and no content → stop_reason refusal.
  let sawContent = false;
  let sawRefusal = false;
  let toolCalls = 0;
  let finish: FinishReason | string | null = null;
  let usage: OpenAI.CompletionUsage | undefined;

  const close = function* (): Generator<Anthropic.RawMessageStreamEvent> {
    if (open !== null) yield { type: 'content_block_stop', index };
    if (openCall) openCall.state = 'closed';
    open = null;
    openCall = null;
  };
  const openCallBlock = function* (call: StreamedCall): Generator<Anthropic.RawMessageStreamEvent> {
    yield* close();
    waiting.splice(waiting.indexOf(call), 1);
    index += 1;
    open = 'tool';
    openCall = call;
    call.state = 'open';
    call.id ??= `call_${index}`;
    toolCalls += 1;
    yield { type: 'content_block_start', index, content_block: { type: 'tool_use', id: call.id, name: call.name, input: {}, caller: { type: 'direct' } } };
    if (call.args) yield { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: call.args } };
  };

  for await (const chunk of chunks) {
    if (!started) {
      started = true;
      yield {
        type: 'message_start',
        message: {
          id: chunk.id,
          type: 'message',
          role: 'assistant',
          model: chunk.model,
          content: [],
          container: null,
          diagnostics: null,
          stop_details: null,
          stop_reason: null,
          stop_sequence: null,
          usage: usageFromChat(chunk.usage ?? undefined),
        },
      };
    }
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    const delta = choice.delta ?? {};
    const reasoning = reasoningOf(delta);
    if (reasoning !== undefined) {
      if (open !== 'thinking') {
        yield* close();
        index += 1;
        open = 'thinking';
        yield { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } };
      }
      yield { type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: reasoning } };
    }
    if (delta.content) sawContent = true;
    else if (delta.refusal) sawRefusal = true;
    const text = delta.content || delta.refusal;
    if (text) {
      if (open !== 'text') {
        yield* close();
        index += 1;
        open = 'text';
        yield { type: 'content_block_start', index, content_block: { type: 'text', text: '', citations: null } };
      }
      yield { type: 'content_block_delta', index, delta: { type: 'text_delta', text } };
    }
    for (const fragment of delta.tool_calls ?? []) {
      const id = fragment.id || undefined;
      const known = callsByIndex.get(fragment.index);
      let call = known;
      if (!call || (id !== undefined && id !== call.id)) {
        // Another id under an index already used: the earlier call there is complete.
        if (known?.state === 'open') yield* close();
        call = { id, name: '', args: '', state: 'waiting' };
        callsByIndex.set(fragment.index, call);
        waiting.push(call);
      }
      if (call.state === 'waiting' && !call.name && fragment.function?.name) call.name = fragment.function.name;
      const partial = fragment.function?.arguments ?? '';
      if (call.state === 'open') {
        call.args += partial;
        if (partial) yield { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: partial } };
      } else if (call.state === 'closed') {
        if (partial.trim() !== '') {
          throw new ProviderError(`The stream sent more arguments for tool call ${call.id} after its block was closed`, null, provider_name);
        }
      } else {
        call.args += partial;
        if (!openCall || isCompleteJson(openCall.args)) yield* openCallBlock(call);
      }
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  if (finish === null) {
    throw incompleteStreamError(provider_name);
  }
  // Calls whose fragments came interleaved with an open call's, in the order they began.
  while (waiting.length > 0) yield* openCallBlock(waiting[0]!);
  yield* close();
  const final = usageFromChat(usage);
  yield {
    type: 'message_delta',
    delta: { stop_reason: sawRefusal && !sawContent ? 'refusal' : stopReasonFromFinish(finish, toolCalls > 0), stop_sequence: null, container: null, stop_details: null },
    usage: {
      input_tokens: usage ? final.input_tokens : null,
      output_tokens: final.output_tokens,
      cache_read_input_tokens: final.cache_read_input_tokens,
      cache_creation_input_tokens: null,
      output_tokens_details: final.output_tokens_details,
      server_tool_use: null,
    },
  };
  yield { type: 'message_stop' };
}
