import type {
  CallToolResult,
  GetPromptResult,
  ListPromptsResult,
  ListResourcesResult,
  ListResourceTemplatesResult,
  ReadResourceResult,
  Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { formatDuration } from '../duration.ts';
import type { Health } from '../upstream.ts';
import { textOf } from '../upstream-requests.ts';

/** The API's objects (spec 3 Area A) made from MCP results: only the fields the spec names, none undefined. */

export const TOOL_DETAILS = ['minimal', 'summary', 'full'] as const;
export type ToolDetail = (typeof TOOL_DETAILS)[number];

type Json = Record<string, unknown>;

/** Copies the named fields that are present. */
function pick(source: object, fields: readonly string[]): Json {
  const result: Json = {};
  for (const field of fields) {
    const value = (source as Json)[field];
    if (value !== undefined) result[field] = value;
  }
  return result;
}

export function serverHealthOf(health: Health): Json {
  return pick(
    {
      name: health.name,
      status: health.status,
      lastChecked: health.lastChecked?.toISOString(),
      lastSuccessful: health.lastSuccessful?.toISOString(),
      latency: health.latencyMs === undefined ? undefined : formatDuration(health.latencyMs),
    },
    ['name', 'status', 'lastChecked', 'lastSuccessful', 'latency'],
  );
}

/** minimal: name and title (MCP's title, else the annotations' title); summary: plus description; full: all. */
export function toolOf(tool: Tool, detail: ToolDetail): Json {
  const title = tool.title ?? tool.annotations?.title;
  const base = pick({ name: tool.name, title }, ['name', 'title']);
  if (detail === 'minimal') return base;
  if (detail === 'summary') return { ...base, ...pick(tool, ['description']) };
  return { ...base, ...pick(tool, ['description', 'inputSchema', 'outputSchema', 'annotations', '_meta']) };
}

/**
 * A tool call's answer: the text of its text content items joined with a newline; when it has no text items but
 * structured content, that content's JSON; otherwise the empty string (images, audio and resources are not text).
 */
export function toolAnswerOf(result: CallToolResult): string {
  const hasText = result.content.some((item) => item.type === 'text');
  if (!hasText && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return textOf(result);
}

export function promptsOf(result: ListPromptsResult): Json {
  return {
    prompts: result.prompts.map((prompt) => ({
      ...pick(prompt, ['name', 'description']),
      ...(prompt.arguments ? { arguments: prompt.arguments.map((argument) => pick(argument, ['name', 'description', 'required'])) } : {}),
      ...pick(prompt, ['_meta']),
    })),
    ...pick(result, ['nextCursor']),
  };
}

export function generatedPromptOf(result: GetPromptResult): Json {
  return { ...pick(result, ['description']), messages: result.messages.map((message) => pick(message, ['role', 'content'])) };
}

export function resourcesOf(result: ListResourcesResult): Json {
  return {
    resources: result.resources.map((resource) => pick(resource, ['uri', 'name', 'description', 'mimeType', '_meta'])),
    ...pick(result, ['nextCursor']),
  };
}

export function resourceTemplatesOf(result: ListResourceTemplatesResult): Json {
  return {
    templates: result.resourceTemplates.map((template) => pick(template, ['uriTemplate', 'name', 'description', 'mimeType', '_meta'])),
    ...pick(result, ['nextCursor']),
  };
}

export function resourceContentsOf(result: ReadResourceResult): Json[] {
  return result.contents.map((content) => pick(content, ['uri', 'mimeType', 'text', 'blob', '_meta']));
}
