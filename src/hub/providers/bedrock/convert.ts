// Messages (Anthropic format) ⇄ Amazon Bedrock Converse / ConverseStream, as @aws-sdk/client-bedrock-runtime takes
// and returns them. Converse's turns have the same shape as Messages (user/assistant, tool results in user turns),
// so the conversion is block by block.

import type Anthropic from '@anthropic-ai/sdk';
import type {
  ContentBlock,
  ConverseRequest,
  ConverseResponse,
  ConverseStreamOutput,
  DocumentFormat,
  ImageFormat,
  Message,
  TokenUsage,
  Tool,
  ToolChoice,
} from '@aws-sdk/client-bedrock-runtime';
import { ProviderError, UnsupportedParameterError } from '../../errors.ts';
import type { MessagesParams, MessagesResponse, MessagesStreamEvent } from '../../provider.ts';
import { contentBlocks, functionTool, outputSchema, rejectUnhandledParameters, rejectUnknownExtra, systemText, toolResultText } from '../../message-format/request.ts';
import { messageUsage, newMessage, textBlock, thinkingBlock, toolUseBlock, type UsageCounts } from '../../message-format/response.ts';
import { incompleteStreamError, MessageStreamBuilder } from '../../message-format/stream-builder.ts';

const PROVIDER = 'bedrock';
const HANDLED = ['system', 'temperature', 'top_p', 'top_k', 'stop_sequences', 'tools', 'tool_choice', 'thinking', 'output_config'];

/** ConverseRequest fields a caller may pass as extra options (the SDK serialises through its schema and drops others). */
export const CONVERSE_OPTIONS = [
  'additionalModelRequestFields',
  'additionalModelResponseFieldPaths',
  'guardrailConfig',
  'performanceConfig',
  'promptVariables',
  'requestMetadata',
  'serviceTier',
] as const satisfies readonly (keyof ConverseRequest)[];

const IMAGE_FORMATS: Record<string, ImageFormat> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' };

/** Builds the ConverseCommand input; `extra` holds Converse fields (additionalModelRequestFields is merged). */
export function toConverseRequest(params: MessagesParams, extra: Record<string, unknown> = {}): ConverseRequest {
  rejectUnhandledParameters(params, HANDLED, PROVIDER);
  rejectUnknownExtra(extra, CONVERSE_OPTIONS, PROVIDER);
  const request: ConverseRequest = {
    modelId: params.model,
    messages: toMessages(params.messages),
    inferenceConfig: {
      maxTokens: params.max_tokens,
      ...(params.temperature !== undefined ? { temperature: params.temperature } : {}),
      ...(params.top_p !== undefined ? { topP: params.top_p } : {}),
      ...(params.stop_sequences?.length ? { stopSequences: params.stop_sequences } : {}),
    },
  };
  const system = systemText(params.system);
  if (system !== undefined) request.system = [{ text: system }];
  if (params.tools?.length || params.tool_choice) request.toolConfig = toToolConfig(params.tools ?? [], params.tool_choice);
  // Converse has no common field for these: models take them in their own request format (Claude's names here)
  const modelFields: Record<string, unknown> = {};
  if (params.top_k !== undefined) modelFields.top_k = params.top_k;
  if (params.thinking && params.thinking.type !== 'disabled') modelFields.thinking = params.thinking;
  const schema = outputSchema(params.output_config, PROVIDER);
  if (schema) request.outputConfig = { textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: JSON.stringify(schema), name: 'output' } } } };
  const { additionalModelRequestFields, ...rest } = extra as Partial<ConverseRequest>;
  const merged = { ...modelFields, ...(additionalModelRequestFields as Record<string, unknown> | undefined) };
  return { ...request, ...rest, ...(Object.keys(merged).length > 0 ? { additionalModelRequestFields: merged as ConverseRequest['additionalModelRequestFields'] } : {}) };
}

function toToolConfig(tools: Anthropic.ToolUnion[], choice: Anthropic.ToolChoice | undefined): NonNullable<ConverseRequest['toolConfig']> {
  const specs: Tool[] = tools.map((tool) => {
    const fn = functionTool(tool, PROVIDER);
    return { toolSpec: { name: fn.name, ...(fn.description !== undefined ? { description: fn.description } : {}), inputSchema: { json: fn.parameters as never } } };
  });
  return { tools: specs, ...(choice ? { toolChoice: toToolChoice(choice) } : {}) };
}

function toToolChoice(choice: Anthropic.ToolChoice): ToolChoice {
  if (choice.type !== 'none' && choice.disable_parallel_tool_use) {
    throw new UnsupportedParameterError('tool_choice.disable_parallel_tool_use', PROVIDER, 'Converse has no switch for parallel tool use');
  }
  switch (choice.type) {
    case 'auto':
      return { auto: {} };
    case 'any':
      return { any: {} };
    case 'tool':
      return { tool: { name: choice.name } };
    case 'none':
      throw new UnsupportedParameterError('tool_choice.none', PROVIDER, 'Converse cannot forbid tool use while tools are offered; send no tools');
  }
}

function toMessages(messages: Anthropic.MessageParam[]): Message[] {
  return messages.map((message) => ({ role: message.role, content: contentBlocks(message.content, PROVIDER).map(toContentBlock) }));
}

function toContentBlock(block: Anthropic.ContentBlockParam, index: number): ContentBlock {
  switch (block.type) {
    case 'text':
      return { text: block.text };
    case 'image': {
      if (block.source.type !== 'base64') throw new UnsupportedParameterError(`image source ${block.source.type}`, PROVIDER, 'Bedrock takes images as bytes; send base64 data');
      const format = IMAGE_FORMATS[block.source.media_type];
      if (!format) throw new UnsupportedParameterError(`image media_type ${block.source.media_type}`, PROVIDER);
      return { image: { format, source: { bytes: Buffer.from(block.source.data, 'base64') } } };
    }
    case 'document':
      if (block.source.type === 'text') return { text: block.source.data };
      if (block.source.type === 'base64') {
        // Converse requires a document name; it must be unique within the request
        return { document: { format: 'pdf' satisfies DocumentFormat, name: `document-${index + 1}`, source: { bytes: Buffer.from(block.source.data, 'base64') } } };
      }
      throw new UnsupportedParameterError(`document source ${block.source.type}`, PROVIDER);
    case 'tool_use':
      return { toolUse: { toolUseId: block.id, name: block.name, input: block.input as never } };
    case 'tool_result':
      return {
        toolResult: {
          toolUseId: block.tool_use_id,
          content: [{ text: toolResultText(block.content, PROVIDER) }],
          status: block.is_error ? 'error' : 'success',
        },
      };
    case 'thinking':
      return { reasoningContent: { reasoningText: { text: block.thinking, ...(block.signature ? { signature: block.signature } : {}) } } };
    case 'redacted_thinking':
      return { reasoningContent: { redactedContent: Buffer.from(block.data, 'base64') } };
    default:
      throw new UnsupportedParameterError(`content block ${block.type}`, PROVIDER);
  }
}

/** Converse's stopReason → stop_reason; malformed output is the model's failure, not an answer. */
export function toStopReason(reason: string | undefined): Anthropic.StopReason | null {
  switch (reason) {
    case undefined:
      return null;
    case 'end_turn':
    case 'tool_use':
    case 'max_tokens':
    case 'stop_sequence':
    case 'model_context_window_exceeded':
      return reason;
    case 'content_filtered':
    case 'guardrail_intervened':
      return 'refusal';
    case 'malformed_model_output':
    case 'malformed_tool_use':
      throw new ProviderError(`The model's output could not be read (stopReason ${reason})`, null, PROVIDER, { code: reason });
    default:
      return 'end_turn';
  }
}

/** Bedrock's inputTokens already excludes cache reads and writes, as Anthropic's input_tokens does. */
function toUsageCounts(usage: TokenUsage | undefined): UsageCounts {
  return { input: usage?.inputTokens ?? 0, output: usage?.outputTokens ?? 0, cacheRead: usage?.cacheReadInputTokens ?? null };
}

function toUsage(usage: TokenUsage | undefined): Anthropic.Usage {
  return { ...messageUsage(toUsageCounts(usage)), cache_creation_input_tokens: usage?.cacheWriteInputTokens ?? null };
}

const base64 = (bytes: Uint8Array | undefined) => Buffer.from(bytes ?? new Uint8Array()).toString('base64');

export function fromConverseResponse(response: ConverseResponse, model: string): MessagesResponse {
  const content: Anthropic.ContentBlock[] = [];
  for (const block of response.output?.message?.content ?? []) {
    if (block.text !== undefined) content.push(textBlock(block.text));
    else if (block.toolUse) content.push(toolUseBlock(block.toolUse.toolUseId ?? '', block.toolUse.name ?? '', block.toolUse.input ?? {}));
    else if (block.reasoningContent?.reasoningText) content.push(thinkingBlock(block.reasoningContent.reasoningText.text ?? '', block.reasoningContent.reasoningText.signature ?? ''));
    else if (block.reasoningContent?.redactedContent) content.push({ type: 'redacted_thinking', data: base64(block.reasoningContent.redactedContent) });
  }
  const stopSequence = (response.additionalModelResponseFields as { stop_sequence?: unknown } | undefined)?.stop_sequence;
  return newMessage({
    model,
    content,
    stop_reason: toStopReason(response.stopReason),
    stop_sequence: typeof stopSequence === 'string' ? stopSequence : null,
    usage: toUsage(response.usage),
  });
}

/** ConverseStream events (messageStart, contentBlock*, messageStop, metadata) → Messages stream events. */
export async function* fromConverseStream(events: AsyncIterable<ConverseStreamOutput>, model: string): AsyncIterable<MessagesStreamEvent> {
  const builder = new MessageStreamBuilder(model);
  let stop: string | undefined;
  let usage: TokenUsage | undefined;
  for await (const event of events) {
    if (event.messageStart) yield* builder.start();
    else if (event.contentBlockStart?.start?.toolUse) {
      const { toolUseId, name } = event.contentBlockStart.start.toolUse;
      yield* builder.toolUse(String(event.contentBlockStart.contentBlockIndex), toolUseId ?? '', name ?? '');
    } else if (event.contentBlockDelta?.delta) {
      const delta = event.contentBlockDelta.delta;
      if (delta.text !== undefined) yield* builder.text(delta.text);
      else if (delta.toolUse) yield* builder.toolInput(String(event.contentBlockDelta.contentBlockIndex), delta.toolUse.input ?? '');
      else if (delta.reasoningContent?.text !== undefined) yield* builder.thinking(delta.reasoningContent.text);
      else if (delta.reasoningContent?.signature !== undefined) yield* builder.signature(delta.reasoningContent.signature);
      else if (delta.reasoningContent?.redactedContent) yield* builder.redactedThinking(base64(delta.reasoningContent.redactedContent));
    } else if (event.messageStop) stop = event.messageStop.stopReason;
    else if (event.metadata) usage = event.metadata.usage;
  }
  if (stop === undefined) throw incompleteStreamError(PROVIDER);
  yield* builder.finish(toStopReason(stop), toUsageCounts(usage));
}
