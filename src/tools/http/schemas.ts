/**
 * The JSON Schemas (2020-12, as OpenAPI 3.1 uses them) of the API's objects, named as spec 3 Area A names them.
 * The OpenAPI document puts them under components/schemas; GET /schemas/<Name>.json serves each one, and every
 * object response's `$schema` is that address (a reference relative to the server: `/schemas/<Name>.json`).
 */

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const schemaLink: Schema = {
  type: 'string',
  format: 'uri-reference',
  readOnly: true,
  description: 'The address of the JSON Schema of this object, relative to this server.',
  examples: ['/schemas/ServerHealth.json'],
};
const meta: Schema = { type: 'object', additionalProperties: true, description: 'The MCP server\'s `_meta`, passed through.' };
const cursor: Schema = {
  type: 'string',
  description: 'Opaque cursor of the next page, from the MCP server; absent on the last page. Pass it back as `?cursor=`.',
};

/** JSON Schema of a tool's input or output (MCP's inputSchema/outputSchema), passed through unchanged. */
const toolSchema: Schema = {
  type: 'object',
  additionalProperties: true,
  properties: {
    $defs: { type: 'object', additionalProperties: true },
    additionalProperties: {},
    properties: { type: 'object', additionalProperties: true },
    required: { type: 'array', items: { type: 'string' } },
    type: { type: 'string' },
  },
};

export const HEALTH_STATUSES = ['ok', 'timeout', 'unreachable', 'unknown'] as const;

export const COMPONENT_SCHEMAS: Record<string, Schema> = {
  ServerHealth: {
    type: 'object',
    additionalProperties: false,
    required: ['name', 'status'],
    properties: {
      $schema: schemaLink,
      name: { type: 'string', description: 'The server\'s name in the configuration.' },
      status: {
        type: 'string',
        enum: [...HEALTH_STATUSES],
        description:
          'ok: the last MCP ping was answered. timeout: the last ping got no answer within the health timeout. ' +
          'unreachable: there is no session (the server failed to start, exited or is restarting) or the ping failed. ' +
          'unknown: not checked yet.',
      },
      lastChecked: { type: 'string', format: 'date-time', description: 'When the last ping (or start attempt) ended.' },
      lastSuccessful: { type: 'string', format: 'date-time', description: 'When a ping was last answered.' },
      latency: {
        type: 'string',
        description: 'Round trip of the last answered ping as a Go duration string, e.g. "1.234ms"; absent when it was not answered.',
        examples: ['842.115µs', '1.234567ms'],
      },
    },
  },
  ServersHealthResponse: {
    type: 'object',
    additionalProperties: false,
    required: ['servers'],
    properties: { $schema: schemaLink, servers: { type: 'array', items: ref('ServerHealth') } },
  },
  ToolSchema: toolSchema,
  ToolAnnotations: {
    type: 'object',
    additionalProperties: true,
    properties: {
      destructiveHint: { type: 'boolean' },
      idempotentHint: { type: 'boolean' },
      openWorldHint: { type: 'boolean' },
      readOnlyHint: { type: 'boolean' },
      title: { type: 'string' },
    },
  },
  Tool: {
    type: 'object',
    additionalProperties: false,
    required: ['name'],
    description: 'detail=minimal: name and title; summary: plus description; full: every field.',
    properties: {
      name: { type: 'string' },
      title: { type: 'string' },
      description: { type: 'string' },
      inputSchema: ref('ToolSchema'),
      outputSchema: ref('ToolSchema'),
      annotations: ref('ToolAnnotations'),
      _meta: meta,
    },
  },
  ToolsResponse: {
    type: 'object',
    additionalProperties: false,
    required: ['tools'],
    properties: { $schema: schemaLink, tools: { type: 'array', items: ref('Tool') } },
  },
  PromptArgument: {
    type: 'object',
    additionalProperties: false,
    required: ['name'],
    properties: { name: { type: 'string' }, description: { type: 'string' }, required: { type: 'boolean' } },
  },
  Prompt: {
    type: 'object',
    additionalProperties: false,
    required: ['name'],
    properties: {
      name: { type: 'string' },
      description: { type: 'string' },
      arguments: { type: 'array', items: ref('PromptArgument') },
      _meta: meta,
    },
  },
  Prompts: {
    type: 'object',
    additionalProperties: false,
    required: ['prompts'],
    properties: { $schema: schemaLink, prompts: { type: 'array', items: ref('Prompt') }, nextCursor: cursor },
  },
  GeneratePromptRequest: {
    type: 'object',
    additionalProperties: false,
    properties: {
      arguments: { type: 'object', additionalProperties: { type: 'string' }, description: 'The prompt\'s arguments, all strings.' },
    },
  },
  PromptMessage: {
    type: 'object',
    additionalProperties: false,
    required: ['role', 'content'],
    properties: {
      role: { type: 'string', examples: ['user', 'assistant'] },
      content: { description: 'MCP content: text, image, audio, resource link or embedded resource, passed through.' },
    },
  },
  GeneratePromptResponse: {
    type: 'object',
    additionalProperties: false,
    required: ['messages'],
    properties: { $schema: schemaLink, description: { type: 'string' }, messages: { type: 'array', items: ref('PromptMessage') } },
  },
  Resource: {
    type: 'object',
    additionalProperties: false,
    required: ['uri', 'name'],
    properties: {
      uri: { type: 'string' },
      name: { type: 'string' },
      description: { type: 'string' },
      mimeType: { type: 'string' },
      _meta: meta,
    },
  },
  Resources: {
    type: 'object',
    additionalProperties: false,
    required: ['resources'],
    properties: { $schema: schemaLink, resources: { type: 'array', items: ref('Resource') }, nextCursor: cursor },
  },
  ResourceContent: {
    type: 'object',
    additionalProperties: false,
    required: ['uri'],
    description: 'One content of a resource: `text`, or `blob` (base64) for binary content.',
    properties: {
      uri: { type: 'string' },
      mimeType: { type: 'string' },
      text: { type: 'string' },
      blob: { type: 'string', contentEncoding: 'base64' },
      _meta: meta,
    },
  },
  ResourceTemplate: {
    type: 'object',
    additionalProperties: false,
    required: ['uriTemplate', 'name'],
    properties: {
      uriTemplate: { type: 'string', description: 'RFC 6570 URI template.' },
      name: { type: 'string' },
      description: { type: 'string' },
      mimeType: { type: 'string' },
      _meta: meta,
    },
  },
  ResourceTemplates: {
    type: 'object',
    additionalProperties: false,
    required: ['templates'],
    properties: { $schema: schemaLink, templates: { type: 'array', items: ref('ResourceTemplate') }, nextCursor: cursor },
  },
  ErrorModel: {
    type: 'object',
    additionalProperties: false,
    required: ['title', 'status', 'detail'],
    description: 'RFC 9457 problem details (application/problem+json).',
    properties: {
      $schema: schemaLink,
      type: { type: 'string', format: 'uri-reference', description: 'Always "about:blank": the status says what kind of problem it is.' },
      title: { type: 'string', description: 'The HTTP status text, e.g. "Not Found".' },
      status: { type: 'integer', description: 'The HTTP status code.' },
      detail: { type: 'string', description: 'What went wrong, e.g. the MCP server\'s own error message.' },
      instance: { type: 'string', format: 'uri-reference', description: 'The path of the request.' },
      code: {
        type: 'string',
        enum: ['host_not_allowed', 'origin_not_allowed', 'unsupported_media_type'],
        description:
          'Which browser-safety rule refused the request: a Host that is not a name of this server (DNS rebinding), an Origin ' +
          'not in cors_allow_origins (a web page), a body that is not application/json. Absent on other problems.',
      },
    },
  },
};

/**
 * One component as a standalone JSON Schema document at `<base>/schemas/<name>.json`: references to other
 * components point at their own documents (relative to this one's $id).
 */
export function standaloneSchema(name: string, id: string): Schema | undefined {
  // own names only: /schemas/__proto__.json must not serve Object.prototype
  if (!Object.hasOwn(COMPONENT_SCHEMAS, name)) return undefined;
  const schema = COMPONENT_SCHEMAS[name];
  return { $schema: 'https://json-schema.org/draft/2020-12/schema', $id: id, title: name, ...(relink(schema) as Schema) };
}

function relink(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(relink);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [
      key,
      key === '$ref' && typeof item === 'string' ? `${item.replace('#/components/schemas/', '')}.json` : relink(item),
    ]),
  );
}
