// Turns a vendor's stream of deltas into the Messages stream events (message_start, content_block_start,
// content_block_delta, content_block_stop, message_delta, message_stop), keeping block indices consistent.

import type Anthropic from '@anthropic-ai/sdk';
import { ProviderError } from '../errors.ts';
import { messageUsage, newMessage, textBlock, thinkingBlock, toolUseBlock, type UsageCounts } from './response.ts';

type Event = Anthropic.RawMessageStreamEvent;
type OpenBlock = { kind: 'text' } | { kind: 'thinking' } | { kind: 'tool_use'; key: string };

export class MessageStreamBuilder {
  private readonly model: string;
  private readonly id: string | undefined;
  private started = false;
  private finished = false;
  private index = -1;
  private open: OpenBlock | null = null;

  constructor(model: string, id?: string) {
    this.model = model;
    this.id = id;
  }

  get isFinished(): boolean {
    return this.finished;
  }

  /** message_start; later calls are no-ops. `input` is the prompt usage when the vendor reports it up front. */
  start(usage: Partial<UsageCounts> = {}, id?: string): Event[] {
    if (this.started) return [];
    this.started = true;
    const message = newMessage({
      ...((id ?? this.id) !== undefined ? { id: id ?? this.id } : {}),
      model: this.model,
      content: [],
      stop_reason: null,
      usage: messageUsage({ input: usage.input ?? 0, output: usage.output ?? 0, cacheRead: usage.cacheRead ?? null }),
    });
    return [{ type: 'message_start', message }];
  }

  text(text: string): Event[] {
    if (text === '') return [];
    const events = this.ensure({ kind: 'text' }, () => textBlock(''));
    events.push({ type: 'content_block_delta', index: this.index, delta: { type: 'text_delta', text } });
    return events;
  }

  thinking(text: string): Event[] {
    if (text === '') return [];
    const events = this.ensure({ kind: 'thinking' }, () => thinkingBlock(''));
    events.push({ type: 'content_block_delta', index: this.index, delta: { type: 'thinking_delta', thinking: text } });
    return events;
  }

  /** A signature for the current thinking block (opens one when none is open). */
  signature(signature: string): Event[] {
    if (signature === '') return [];
    const events = this.ensure({ kind: 'thinking' }, () => thinkingBlock(''));
    events.push({ type: 'content_block_delta', index: this.index, delta: { type: 'signature_delta', signature } });
    return events;
  }

  /** A redacted_thinking block: complete at its start (it has no deltas). */
  redactedThinking(data: string): Event[] {
    const events = this.closeOpen();
    events.unshift(...this.start());
    this.index += 1;
    events.push({ type: 'content_block_start', index: this.index, content_block: { type: 'redacted_thinking', data } });
    events.push({ type: 'content_block_stop', index: this.index });
    return events;
  }

  /** Starts a tool_use block; `key` identifies the vendor's tool call so argument deltas find their block. */
  toolUse(key: string, id: string, name: string): Event[] {
    const events = this.closeOpen();
    events.unshift(...this.start());
    this.index += 1;
    this.open = { kind: 'tool_use', key };
    events.push({ type: 'content_block_start', index: this.index, content_block: toolUseBlock(id, name, {}) });
    return events;
  }

  /** Argument JSON for the tool call `key`; it must be the open block (vendors stream one call at a time). */
  toolInput(key: string, partialJson: string): Event[] {
    if (partialJson === '') return [];
    if (this.open?.kind !== 'tool_use' || this.open.key !== key) {
      throw new ProviderError(`The stream sent arguments for tool call ${key} that is not the open block`, null, null);
    }
    return [{ type: 'content_block_delta', index: this.index, delta: { type: 'input_json_delta', partial_json: partialJson } }];
  }

  /** Closes the open block, then message_delta and message_stop. */
  finish(stopReason: Anthropic.StopReason | null, usage: UsageCounts, stopSequence: string | null = null): Event[] {
    const events = [...this.start(), ...this.closeOpen()];
    this.finished = true;
    const full = messageUsage(usage);
    events.push({
      type: 'message_delta',
      delta: { stop_reason: stopReason, stop_sequence: stopSequence, stop_details: null, container: null },
      usage: {
        input_tokens: full.input_tokens,
        output_tokens: full.output_tokens,
        cache_creation_input_tokens: null,
        cache_read_input_tokens: full.cache_read_input_tokens,
        output_tokens_details: full.output_tokens_details,
        server_tool_use: null,
      },
    });
    events.push({ type: 'message_stop' });
    return events;
  }

  private ensure(block: OpenBlock, initial: () => Anthropic.ContentBlock): Event[] {
    const events = this.start();
    if (this.open?.kind === block.kind && block.kind !== 'tool_use') return events;
    events.push(...this.closeOpen());
    this.index += 1;
    this.open = block;
    events.push({ type: 'content_block_start', index: this.index, content_block: initial() });
    return events;
  }

  private closeOpen(): Event[] {
    if (!this.open) return [];
    this.open = null;
    return [{ type: 'content_block_stop', index: this.index }];
  }
}

/** The error for a vendor stream that ended before its final event (connection closed early). */
export function incompleteStreamError(provider: string, cause?: unknown): ProviderError {
  return new ProviderError('The stream ended before the response was complete', cause ?? null, provider);
}
