// Messages (Anthropic format) ⇄ Gemini generateContent, as the @google/genai SDK takes and returns it.

import type Anthropic from '@anthropic-ai/sdk';
import {
  FinishReason,
  FunctionCallingConfigMode,
  type Content,
  type GenerateContentConfig,
  type GenerateContentParameters,
  type GenerateContentResponse,
  type Part,
  type ThinkingConfig,
  type ToolConfig,
} from '@google/genai';
import { InvalidRequestError, UnsupportedParameterError } from '../../errors.ts';
import type { MessagesParams, MessagesResponse, MessagesStreamEvent } from '../../provider.ts';
import {
  contentBlocks,
  functionTool,
  outputSchema,
  rejectUnhandledParameters,
  rejectUnknownExtra,
  systemText,
  toolNamesById,
  toolResultText,
} from '../../message-format/request.ts';
import { generateId, messageUsage, newMessage, textBlock, thinkingBlock, toolUseBlock, type UsageCounts } from '../../message-format/response.ts';
import { incompleteStreamError, MessageStreamBuilder } from '../../message-format/stream-builder.ts';

const HANDLED = ['system', 'temperature', 'top_p', 'top_k', 'stop_sequences', 'tools', 'tool_choice', 'thinking', 'output_config'];

/** GenerateContentConfig fields a caller may pass as extra options (the SDK drops unknown ones silently). */
const GEMINI_CONFIG_OPTIONS = [
  'serviceTier',
  'candidateCount',
  'responseLogprobs',
  'logprobs',
  'presencePenalty',
  'frequencyPenalty',
  'seed',
  'responseMimeType',
  'responseSchema',
  'responseJsonSchema',
  'routingConfig',
  'modelSelectionConfig',
  'safetySettings',
  'labels',
  'cachedContent',
  'responseModalities',
  'mediaResolution',
  'speechConfig',
  'audioTimestamp',
  'imageConfig',
  'enableEnhancedCivicAnswers',
  'modelArmorConfig',
  'store',
] as const satisfies readonly (keyof GenerateContentConfig)[];

/**
 * Builds the SDK's generateContent parameters; `extra` is merged into the config (e.g. safetySettings). `provider`
 * names the Hub provider in errors (gemini, or vertexai, which speaks the same format).
 */
export function toGeminiRequest(params: MessagesParams, extra: Record<string, unknown> = {}, provider = 'gemini'): GenerateContentParameters {
  rejectUnhandledParameters(params, HANDLED, provider);
  rejectUnknownExtra(extra, GEMINI_CONFIG_OPTIONS, provider);
  const config: GenerateContentConfig = { maxOutputTokens: params.max_tokens };
  const system = systemText(params.system);
  if (system !== undefined) config.systemInstruction = system;
  if (params.temperature !== undefined) config.temperature = params.temperature;
  if (params.top_p !== undefined) config.topP = params.top_p;
  if (params.top_k !== undefined) config.topK = params.top_k;
  if (params.stop_sequences?.length) config.stopSequences = params.stop_sequences;
  if (params.tools?.length) config.tools = [{ functionDeclarations: params.tools.map((tool) => toFunctionDeclaration(tool, provider)) }];
  if (params.tool_choice) config.toolConfig = toToolConfig(params.tool_choice, provider);
  if (params.thinking) config.thinkingConfig = toThinkingConfig(params.thinking, provider);
  const schema = outputSchema(params.output_config, provider);
  if (schema) {
    config.responseMimeType = 'application/json';
    config.responseJsonSchema = schema;
  }
  return { model: params.model, contents: toContents(params.messages, provider), config: { ...config, ...extra } };
}

function toFunctionDeclaration(tool: Anthropic.ToolUnion, provider: string) {
  const fn = functionTool(tool, provider);
  return { name: fn.name, ...(fn.description !== undefined ? { description: fn.description } : {}), parametersJsonSchema: fn.parameters };
}

function toToolConfig(choice: Anthropic.ToolChoice, provider: string): ToolConfig {
  if (choice.type !== 'none' && choice.disable_parallel_tool_use) {
    throw new UnsupportedParameterError('tool_choice.disable_parallel_tool_use', provider, 'Gemini decides on parallel function calls itself');
  }
  switch (choice.type) {
    case 'auto':
      return { functionCallingConfig: { mode: FunctionCallingConfigMode.AUTO } };
    case 'any':
      return { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY } };
    case 'tool':
      return { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY, allowedFunctionNames: [choice.name] } };
    case 'none':
      return { functionCallingConfig: { mode: FunctionCallingConfigMode.NONE } };
  }
}

/** enabled → that budget; disabled → budget 0; adaptive → dynamic budget (-1). */
function toThinkingConfig(thinking: Anthropic.ThinkingConfigParam, provider: string): ThinkingConfig {
  switch (thinking.type) {
    case 'enabled':
      return { thinkingBudget: thinking.budget_tokens, includeThoughts: thinking.display !== 'omitted' };
    case 'adaptive':
      return { thinkingBudget: -1, includeThoughts: thinking.display !== 'omitted' };
    case 'disabled':
      return { thinkingBudget: 0 };
    default:
      throw new UnsupportedParameterError(`thinking.type=${thinking.type}`, provider);
  }
}

function toContents(messages: Anthropic.MessageParam[], provider: string): Content[] {
  const names = toolNamesById(messages);
  return messages.map((message) => {
    const parts: Part[] = [];
    // A thinking block with a signature and no text carries Gemini's thoughtSignature of the part after it.
    let pendingSignature: string | undefined;
    const push = (part: Part) => {
      if (pendingSignature !== undefined) part.thoughtSignature = pendingSignature;
      pendingSignature = undefined;
      parts.push(part);
    };
    for (const block of contentBlocks(message.content, provider)) {
      switch (block.type) {
        case 'text':
          push({ text: block.text });
          break;
        case 'image':
          if (block.source.type !== 'base64') {
            throw new UnsupportedParameterError(`image source ${block.source.type}`, provider, 'Gemini takes images inline; send base64 data');
          }
          push({ inlineData: { mimeType: block.source.media_type, data: block.source.data } });
          break;
        case 'document':
          if (block.source.type === 'base64') push({ inlineData: { mimeType: block.source.media_type, data: block.source.data } });
          else if (block.source.type === 'text') push({ text: block.source.data });
          else throw new UnsupportedParameterError(`document source ${block.source.type}`, provider);
          break;
        case 'tool_use':
          push({ functionCall: { id: block.id, name: block.name, args: block.input as Record<string, unknown> } });
          break;
        case 'tool_result': {
          const name = names.get(block.tool_use_id);
          if (name === undefined) throw new InvalidRequestError(`tool_result ${block.tool_use_id} answers no tool_use in the conversation`, null, provider, { param: 'messages' });
          const output = toolResultText(block.content, provider);
          push({ functionResponse: { id: block.tool_use_id, name, response: block.is_error ? { error: output } : { output } } });
          break;
        }
        case 'thinking':
          if (block.thinking === '' && block.signature) pendingSignature = block.signature;
          else push({ text: block.thinking, thought: true, ...(block.signature ? { thoughtSignature: block.signature } : {}) });
          break;
        default:
          throw new UnsupportedParameterError(`content block ${block.type}`, provider);
      }
    }
    if (pendingSignature !== undefined) parts.push({ text: '', thought: true, thoughtSignature: pendingSignature });
    return { role: message.role === 'assistant' ? 'model' : 'user', parts };
  });
}

const REFUSALS = new Set<string>([
  FinishReason.SAFETY,
  FinishReason.RECITATION,
  FinishReason.BLOCKLIST,
  FinishReason.PROHIBITED_CONTENT,
  FinishReason.SPII,
  FinishReason.IMAGE_SAFETY,
  FinishReason.IMAGE_PROHIBITED_CONTENT,
]);

/** finishReason → stop_reason; STOP with function calls is tool_use (Gemini has no separate reason for it). */
export function toStopReason(finish: string | undefined, hasToolUse: boolean): Anthropic.StopReason | null {
  if (finish === undefined) return null;
  if (finish === FinishReason.MAX_TOKENS) return 'max_tokens';
  if (REFUSALS.has(finish)) return 'refusal';
  return hasToolUse ? 'tool_use' : 'end_turn';
}

/** Anthropic's input_tokens excludes cache reads; output includes thinking, like Anthropic's output_tokens. */
export function toUsageCounts(usage: GenerateContentResponse['usageMetadata']): UsageCounts {
  const cached = usage?.cachedContentTokenCount ?? 0;
  const thoughts = usage?.thoughtsTokenCount;
  return {
    input: (usage?.promptTokenCount ?? 0) + (usage?.toolUsePromptTokenCount ?? 0) - cached,
    output: (usage?.candidatesTokenCount ?? 0) + (thoughts ?? 0),
    cacheRead: usage?.cachedContentTokenCount ?? null,
    thinking: thoughts ?? null,
  };
}

export function fromGeminiResponse(response: GenerateContentResponse, model: string): MessagesResponse {
  const candidate = response.candidates?.[0];
  const content: Anthropic.ContentBlock[] = [];
  for (const part of candidate?.content?.parts ?? []) {
    if (part.thought) {
      content.push(thinkingBlock(part.text ?? '', part.thoughtSignature ?? ''));
      continue;
    }
    if (part.thoughtSignature) content.push(thinkingBlock('', part.thoughtSignature));
    if (part.functionCall) {
      content.push(toolUseBlock(part.functionCall.id ?? generateId('toolu'), part.functionCall.name ?? '', part.functionCall.args ?? {}));
    } else if (part.text !== undefined) {
      const last = content.at(-1);
      if (last?.type === 'text' && !part.thoughtSignature) last.text += part.text;
      else content.push(textBlock(part.text));
    }
  }
  const blocked = !candidate && response.promptFeedback?.blockReason !== undefined;
  const stop = blocked ? 'refusal' : toStopReason(candidate?.finishReason ?? FinishReason.STOP, content.some((b) => b.type === 'tool_use'));
  return newMessage({
    ...(response.responseId ? { id: response.responseId } : {}),
    model: response.modelVersion ?? model,
    content,
    stop_reason: stop,
    usage: messageUsage(toUsageCounts(response.usageMetadata)),
  });
}

/** Gemini's SSE chunks (each a partial GenerateContentResponse) → Messages stream events. */
export async function* fromGeminiStream(chunks: AsyncIterable<GenerateContentResponse>, model: string, provider = 'gemini'): AsyncIterable<MessagesStreamEvent> {
  const builder = new MessageStreamBuilder(model);
  let finish: string | undefined;
  let usage: GenerateContentResponse['usageMetadata'];
  let toolCalls = 0;
  let blocked = false;
  for await (const chunk of chunks) {
    yield* builder.start({ input: toUsageCounts(chunk.usageMetadata).input }, chunk.responseId);
    if (chunk.usageMetadata) usage = chunk.usageMetadata;
    const candidate = chunk.candidates?.[0];
    if (!candidate && chunk.promptFeedback?.blockReason !== undefined) blocked = true;
    for (const part of candidate?.content?.parts ?? []) {
      if (part.thought) {
        yield* builder.thinking(part.text ?? '');
        if (part.thoughtSignature) yield* builder.signature(part.thoughtSignature);
        continue;
      }
      if (part.thoughtSignature) yield* builder.signature(part.thoughtSignature);
      if (part.functionCall) {
        const key = `call-${toolCalls++}`;
        yield* builder.toolUse(key, part.functionCall.id ?? generateId('toolu'), part.functionCall.name ?? '');
        yield* builder.toolInput(key, JSON.stringify(part.functionCall.args ?? {}));
      } else if (part.text) {
        yield* builder.text(part.text);
      }
    }
    if (candidate?.finishReason) finish = candidate.finishReason;
  }
  if (finish === undefined && !blocked) throw incompleteStreamError(provider);
  yield* builder.finish(blocked ? 'refusal' : toStopReason(finish, toolCalls > 0), toUsageCounts(usage));
}
