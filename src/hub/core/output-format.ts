// output_format: a zod schema (typed parsed_output) or a raw JSON-schema output configuration (parsed JSON).
// Both become the Messages request's output_config.format; the text of the answer is parsed afterwards.

import type Anthropic from '@anthropic-ai/sdk';
import { z } from 'zod';
import { ContentFilterFinishReasonError, InvalidRequestError, LengthFinishReasonError, ProviderError } from '../errors.ts';

export type ParsedMessage<T> = Anthropic.Message & { parsed_output: T | null };

export interface OutputFormatPlan {
  format: Anthropic.JSONOutputFormat;
  parse(text: string): unknown;
}

export function isZodSchema(value: unknown): value is z.ZodType {
  return typeof value === 'object' && value !== null && '_zod' in value && typeof (value as z.ZodType).safeParse === 'function';
}

/** The JSON schema of a raw configuration: {type:'json_schema', schema}, OpenAI's {json_schema:{schema}}, or a bare schema. */
function rawSchema(value: Record<string, unknown>): Record<string, unknown> {
  if (value.type === 'json_schema') {
    if (typeof value.schema === 'object' && value.schema !== null) return value.schema as Record<string, unknown>;
    const inner = value.json_schema as { schema?: unknown } | undefined;
    if (typeof inner?.schema === 'object' && inner.schema !== null) return inner.schema as Record<string, unknown>;
    throw new InvalidRequestError("output_format of type 'json_schema' needs a schema", null, null, { param: 'output_format' });
  }
  return value;
}

export function planOutputFormat(output_format: unknown, provider_name: string): OutputFormatPlan {
  if (isZodSchema(output_format)) {
    const { $schema: _ignored, ...schema } = z.toJSONSchema(output_format) as Record<string, unknown>;
    return {
      format: { type: 'json_schema', schema },
      parse(text) {
        const result = output_format.safeParse(parseJson(text, provider_name));
        if (!result.success) {
          throw new ProviderError(`The model's output does not match output_format: ${result.error.message}`, result.error, provider_name);
        }
        return result.data;
      },
    };
  }
  if (typeof output_format === 'object' && output_format !== null && !Array.isArray(output_format)) {
    return { format: { type: 'json_schema', schema: rawSchema(output_format as Record<string, unknown>) }, parse: (text) => parseJson(text, provider_name) };
  }
  throw new InvalidRequestError('output_format must be a zod schema or a JSON-schema output configuration', null, null, {
    param: 'output_format',
  });
}

function parseJson(text: string, provider_name: string): unknown {
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new ProviderError("The model's output is not valid JSON", cause, provider_name);
  }
}

/**
 * Adds parsed_output. An answer cut by the token limit or refused cannot hold the structured output: those raise
 * LengthFinishReasonError / ContentFilterFinishReasonError (the message is in original_exception's place: `cause`).
 */
export function withParsedOutput<T>(message: Anthropic.Message, plan: OutputFormatPlan, provider_name: string | null = null): ParsedMessage<T> {
  if (message.stop_reason === 'max_tokens' || message.stop_reason === 'model_context_window_exceeded') {
    throw new LengthFinishReasonError('The answer was cut at the token limit before the structured output was complete', null, provider_name);
  }
  if (message.stop_reason === 'refusal') {
    throw new ContentFilterFinishReasonError('The answer was refused, so it has no structured output', null, provider_name);
  }
  const text = message.content
    .filter((block): block is Anthropic.TextBlock => block.type === 'text')
    .map((block) => block.text)
    .join('');
  return { ...message, parsed_output: text === '' ? null : (plan.parse(text) as T) };
}
