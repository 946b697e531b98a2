// What some OpenAI-compatible vendors do differently from OpenAI, applied around the one implementation
// (./provider.ts): to the chat request before it is sent, to the completion or chunks that come back, and to the
// model list. A service declares its quirks in ./services.ts; a service without any is sent and read as OpenAI's.

import type OpenAI from 'openai';
import { UnsupportedParameterError } from '../../errors.ts';
import type { Model } from '../../provider.ts';

type FinishReason = OpenAI.ChatCompletion.Choice['finish_reason'];

export interface ServiceQuirks {
  /** The vendor has no structured output: response_format is refused before any request. */
  no_response_format?: boolean;
  /** The vendor takes only max_tokens: a completion request's max_completion_tokens is sent as max_tokens. */
  max_tokens_only?: boolean;
  /** The vendor's own finish reasons, as OpenAI's (an unknown one would read as a normal end). */
  finish_reasons?: Readonly<Record<string, FinishReason>>;
  /** The vendor refuses a tool parameter property with `oneOf` but no `type`: it is given type 'string'. */
  typed_one_of?: boolean;
  /** The vendor takes reasoning_effort as `reasoning: {effort}`. */
  reasoning_object?: boolean;
  /** The answer's reasoning comes inside the content as <think>…</think>: moved to reasoning_content. */
  think_tags?: boolean;
  /** The vendor lists models elsewhere than GET {base}/models, in its own shape. */
  model_catalog?: ModelCatalog;
}

export interface ModelCatalog {
  /** The catalog's address, from the client's base address. */
  url(base: string): string;
  headers?: Record<string, string>;
  /** The catalog's answer as Models (entries without an id are skipped). */
  models(body: unknown, provider: string): Model[];
}

/**
 * The chat request as the vendor takes it. `origin` names what the caller set: a Messages request's structured
 * output is its output_format, a completion request's its response_format.
 */
export function adaptChatRequest<Body extends object>(body: Body, quirks: ServiceQuirks, provider: string, origin: 'messages' | 'completion'): Body {
  const out = { ...body } as Record<string, unknown>;
  if (quirks.no_response_format && out.response_format !== undefined) {
    throw new UnsupportedParameterError(origin === 'messages' ? 'output_format' : 'response_format', provider, 'The provider has no structured output.');
  }
  if (quirks.max_tokens_only && out.max_completion_tokens !== undefined) {
    out.max_tokens ??= out.max_completion_tokens;
    delete out.max_completion_tokens;
  }
  if (quirks.typed_one_of && Array.isArray(out.tools)) out.tools = out.tools.map(withTypedOneOf);
  if (quirks.reasoning_object && out.reasoning_effort !== undefined) {
    const effort = out.reasoning_effort;
    delete out.reasoning_effort;
    if (effort !== null && effort !== 'none') out.reasoning ??= { effort };
  }
  return out as Body;
}

function withTypedOneOf(tool: unknown): unknown {
  const fn = (tool as { function?: { parameters?: { properties?: Record<string, Record<string, unknown>> } } }).function;
  const properties = fn?.parameters?.properties;
  if (!properties || typeof properties !== 'object') return tool;
  const typed = Object.fromEntries(
    Object.entries(properties).map(([name, schema]) => [name, schema && 'oneOf' in schema && !('type' in schema) ? { ...schema, type: 'string' } : schema]),
  );
  return { ...(tool as object), function: { ...fn, parameters: { ...fn.parameters, properties: typed } } };
}

/** A completion as OpenAI would give it (changed in place). */
export function adaptCompletion(completion: OpenAI.ChatCompletion, quirks: ServiceQuirks): OpenAI.ChatCompletion {
  for (const choice of completion.choices ?? []) {
    choice.finish_reason = mappedFinish(choice.finish_reason, quirks);
    if (quirks.think_tags && typeof choice.message?.content === 'string') {
      const { text, reasoning } = splitThinkTags(choice.message.content);
      if (reasoning !== '') {
        choice.message.content = text;
        (choice.message as { reasoning_content?: string }).reasoning_content = reasoning;
      }
    }
  }
  return completion;
}

function mappedFinish<R extends FinishReason | null>(reason: R, quirks: ServiceQuirks): R {
  return ((reason !== null && quirks.finish_reasons?.[reason]) || reason) as R;
}

const THINK_TAG = /<think>([\s\S]*?)(?:<\/think>|$)/g;

function splitThinkTags(content: string): { text: string; reasoning: string } {
  const reasoning: string[] = [];
  const text = content.replace(THINK_TAG, (_, inner: string) => (reasoning.push(inner.trim()), ''));
  return { text: reasoning.length > 0 ? text.trimStart() : text, reasoning: reasoning.join('\n') };
}

/** A chunk stream as OpenAI would give it. */
export async function* adaptChunks(chunks: AsyncIterable<OpenAI.ChatCompletionChunk>, quirks: ServiceQuirks): AsyncGenerator<OpenAI.ChatCompletionChunk> {
  const splitter = quirks.think_tags ? new ThinkTagSplitter() : null;
  for await (const chunk of chunks) {
    for (const choice of chunk.choices ?? []) {
      choice.finish_reason = mappedFinish(choice.finish_reason, quirks);
      const finished = choice.finish_reason != null;
      if (splitter && choice.index === 0 && (typeof choice.delta?.content === 'string' || finished)) {
        // a finishing chunk (MiniMax's may have no delta) also gives back what was held as a possible tag
        const delta = (choice.delta ??= {});
        const { text, reasoning } = splitter.push(delta.content ?? '', finished);
        if (typeof delta.content === 'string' || text !== '') delta.content = text;
        if (reasoning !== '') (delta as { reasoning_content?: string }).reasoning_content = reasoning;
      }
    }
    yield chunk;
  }
}

/**
 * Splits streamed text into reasoning (inside <think>…</think>) and content, across chunk boundaries: a chunk that
 * ends with what may be the start of a tag keeps that much back until the next chunk tells.
 */
class ThinkTagSplitter {
  #inside = false;
  #held = '';
  #started = false;

  push(piece: string, last: boolean): { text: string; reasoning: string } {
    let rest = this.#held + piece;
    this.#held = '';
    let text = '';
    let reasoning = '';
    while (rest !== '') {
      const tag = this.#inside ? '</think>' : '<think>';
      const at = rest.indexOf(tag);
      if (at !== -1) {
        if (this.#inside) reasoning += rest.slice(0, at);
        else text += rest.slice(0, at);
        rest = rest.slice(at + tag.length);
        this.#inside = !this.#inside;
        continue;
      }
      const keep = last ? 0 : partialTagLength(rest, tag);
      if (this.#inside) reasoning += rest.slice(0, rest.length - keep);
      else text += rest.slice(0, rest.length - keep);
      this.#held = rest.slice(rest.length - keep);
      rest = '';
    }
    // the whitespace between the reasoning and the answer is not part of the answer
    if (!this.#started) {
      text = text.trimStart();
      if (text !== '') this.#started = true;
    }
    return { text, reasoning };
  }
}

/** How many characters at the end of `text` could begin `tag`. */
function partialTagLength(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) {
    if (tag.startsWith(text.slice(text.length - n))) return n;
  }
  return 0;
}

/**
 * A listed model with the fields OpenAI's Model has: some vendors leave out `object`, `created` or `owned_by`
 * (Eden AI, Requesty), which callers of an OpenAI-shaped API may read.
 */
export function completeModel(model: Partial<Model> & { id: string }, provider: string): Model {
  return {
    ...model,
    id: model.id,
    object: 'model',
    created: typeof model.created === 'number' ? model.created : 0,
    owned_by: typeof model.owned_by === 'string' && model.owned_by !== '' ? model.owned_by : provider,
  };
}
