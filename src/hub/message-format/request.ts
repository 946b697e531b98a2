// Helpers for reading a Messages request (Anthropic format) when converting it to another vendor's request.

import type Anthropic from '@anthropic-ai/sdk';
import { InvalidRequestError, UnsupportedParameterError } from '../errors.ts';
import type { MessagesParams } from '../provider.ts';

/** The request as converters read it (the provider contract's MessagesParams). */
export type MessagesRequest = MessagesParams;

/** The Messages request fields other vendors' formats can express; converters handle these and refuse the rest. */
export const PORTABLE_MESSAGES_FIELDS: readonly string[] = [
  'model',
  'messages',
  'max_tokens',
  'system',
  'temperature',
  'top_p',
  'top_k',
  'stop_sequences',
  'tools',
  'tool_choice',
  'metadata',
  'thinking',
  'cache_control',
  'output_config',
];

export type ContentBlockParam = Anthropic.ContentBlockParam;

/**
 * Throws UnsupportedParameterError for the first top-level parameter that is set and that the converter does not
 * handle, so no parameter is dropped silently. `model`, `max_tokens` and `messages` are always handled, and so is
 * `cache_control`: these vendors cache prompt prefixes automatically, so a caching mark asks for nothing they do
 * not already do (the same rule as the OpenAI-compatible services; see docs/hub.md).
 */
export function rejectUnhandledParameters(params: MessagesRequest, handled: readonly string[], provider: string): void {
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    if (key === 'model' || key === 'max_tokens' || key === 'messages' || key === 'cache_control' || handled.includes(key)) continue;
    throw new UnsupportedParameterError(key, provider);
  }
}

/** The system prompt as plain text (blocks joined by a blank line; their cache_control marks are not sent). */
export function systemText(system: MessagesRequest['system']): string | undefined {
  if (system === undefined || system === null) return undefined;
  if (typeof system === 'string') return system;
  return system.map((block) => block.text).join('\n\n');
}

/**
 * A message's content as a list of blocks (a string is one text block). Block fields that only Anthropic reads
 * (citations, a document's title and context, image transformations) raise UnsupportedParameterError when set;
 * cache_control is accepted (see rejectUnhandledParameters).
 */
export function contentBlocks(content: string | ContentBlockParam[], provider: string): ContentBlockParam[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  for (const block of content) {
    const fields = block as { citations?: unknown; title?: unknown; context?: unknown; transformations?: unknown };
    const set = (value: unknown) => value !== undefined && value !== null && !(Array.isArray(value) && value.length === 0);
    if (block.type === 'text' && set(fields.citations)) throw new UnsupportedParameterError('text.citations', provider);
    if (block.type === 'document') {
      if ((fields.citations as { enabled?: boolean } | null | undefined)?.enabled) throw new UnsupportedParameterError('document.citations', provider);
      if (set(fields.title)) throw new UnsupportedParameterError('document.title', provider);
      if (set(fields.context)) throw new UnsupportedParameterError('document.context', provider);
    }
    if (block.type === 'image' && set(fields.transformations)) throw new UnsupportedParameterError('image.transformations', provider);
  }
  return content;
}

/** Text of a tool_result's content; images inside a tool result are not representable as vendor tool output. */
export function toolResultText(content: Anthropic.ToolResultBlockParam['content'], provider: string): string {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  return content
    .map((block) => {
      if (block.type === 'text') return block.text;
      throw new UnsupportedParameterError(`tool_result content of type ${block.type}`, provider, 'Only text tool results can be converted');
    })
    .join('\n');
}

/** Maps tool_use ids to tool names across the conversation (some vendors name the tool in the result). */
export function toolNamesById(messages: Anthropic.MessageParam[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const message of messages) {
    if (typeof message.content === 'string') continue;
    for (const block of message.content) if (block.type === 'tool_use') names.set(block.id, block.name);
  }
  return names;
}

/** A `tools` entry as a plain function tool; server tools (web search, code execution…) are Anthropic-only. */
export function functionTool(tool: Anthropic.ToolUnion, provider: string): { name: string; description?: string; parameters: Record<string, unknown> } {
  if ('input_schema' in tool && (tool.type === undefined || tool.type === null || tool.type === 'custom')) {
    return {
      name: tool.name,
      ...(tool.description !== undefined ? { description: tool.description } : {}),
      parameters: tool.input_schema as Record<string, unknown>,
    };
  }
  throw new UnsupportedParameterError(`tools[type=${'type' in tool ? String(tool.type) : 'unknown'}]`, provider, 'Only custom (function) tools can be converted');
}

/** thinking.budget_tokens, or null for the other thinking configurations. */
export function thinkingBudget(thinking: Anthropic.ThinkingConfigParam): number | null {
  return thinking.type === 'enabled' ? thinking.budget_tokens : null;
}

/** output_config.format (JSON schema) is supported by every converter; effort is not. */
export function outputSchema(config: Anthropic.OutputConfig | undefined, provider: string): Record<string, unknown> | null {
  if (!config) return null;
  if (config.effort !== undefined && config.effort !== null) throw new UnsupportedParameterError('output_config.effort', provider);
  return config.format ? config.format.schema : null;
}

/** A tool result as the text a vendor's tool message carries; an error result (is_error) is marked "Error: ". */
export function toolOutput(block: Anthropic.ToolResultBlockParam, provider: string): string {
  const text = toolResultText(block.content, provider);
  return block.is_error ? `Error: ${text}` : text;
}

/**
 * Extra (provider-specific) options must be fields the vendor SDK knows: SDKs that serialise through a schema drop
 * unknown fields without a word, so an unknown one raises UnsupportedParameterError instead.
 */
export function rejectUnknownExtra(extra: Record<string, unknown>, known: readonly string[], provider: string): void {
  for (const key of Object.keys(extra)) {
    if (!known.includes(key)) throw new UnsupportedParameterError(key, provider, `Known ${provider} options: ${known.join(', ')}`);
  }
}

/** How a vendor with chat roles (system, user, assistant, tool) writes each kind of turn; see toRoleMessages. */
export interface RoleMessageWriter<Message, Part extends { type: string }> {
  system(text: string): Message;
  assistant(blocks: ContentBlockParam[]): Message;
  /** A tool result as a tool message; `name` is the tool the result answers. */
  toolResult(block: Anthropic.ToolResultBlockParam, name: string): Message;
  userPart(block: ContentBlockParam): Part;
  /** A user turn: a lone text part comes as its string. */
  user(content: string | Part[]): Message;
}

/**
 * A conversation as role messages: the system prompt first, then each turn. A user turn's tool results become tool
 * messages placed before the rest of the turn, as tool messages must directly follow the assistant's tool calls.
 */
export function toRoleMessages<Message, Part extends { type: string }>(
  params: MessagesRequest,
  provider: string,
  writer: RoleMessageWriter<Message, Part>,
): Message[] {
  const messages: Message[] = [];
  const system = systemText(params.system);
  if (system !== undefined) messages.push(writer.system(system));
  const names = toolNamesById(params.messages);
  for (const message of params.messages) {
    const blocks = contentBlocks(message.content, provider);
    if (message.role === 'assistant') {
      messages.push(writer.assistant(blocks));
      continue;
    }
    const parts: Part[] = [];
    for (const block of blocks) {
      if (block.type === 'tool_result') {
        const name = names.get(block.tool_use_id);
        if (name === undefined) {
          throw new InvalidRequestError(`tool_result ${block.tool_use_id} answers no tool_use in the conversation`, null, provider, { param: 'messages' });
        }
        messages.push(writer.toolResult(block, name));
      } else parts.push(writer.userPart(block));
    }
    if (parts.length > 0) {
      const lone = parts.length === 1 && parts[0].type === 'text' ? (parts[0] as unknown as { text: string }).text : undefined;
      messages.push(writer.user(lone ?? parts));
    }
  }
  return messages;
}
