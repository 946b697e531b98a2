import { STATUS_CODES } from 'node:http';
import { COMPONENT_SCHEMAS } from './schemas.ts';
import { PROBLEM_TYPE } from './problem.ts';
import { SWAGGER_UI_FILES } from './docs-page.ts';
import { TOOL_DETAILS } from './views.ts';

type Json = Record<string, unknown>;

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const ok = (description: string, schema: Json): Json => ({ 200: { description, content: { 'application/json': { schema } } } });

const PROBLEM_WHEN: Record<number, string> = {
  401: 'The tool server has API keys (auth.keys) and the request has none in `Authorization: Bearer <key>`, a malformed or unknown one, or a key-like query parameter (keys are never accepted in the URL).',
  400: 'Bad request: a path that is not valid percent-encoding, a missing `uri` or repeated query parameter, a body that is not JSON or not an object, or parameters the MCP server rejected as invalid (-32602: missing or invalid arguments, a bad cursor).',
  403:
    'The caller\'s key may not use this server, tool, prompt or resource; or the tool is not in the server\'s allow-list; or, on every route, ' +
    'the browser guard refused the request (`code`: host_not_allowed, a Host that is not a name of this server — DNS rebinding; ' +
    'origin_not_allowed, an Origin of another web page that cors_allow_origins does not list).',
  404: 'No such server, tool, prompt or resource.',
  413: 'The request body is larger than the limit.',
  415: 'The request has a body that is not `Content-Type: application/json` (`code`: unsupported_media_type): a web page\'s form or text/plain request never reaches a tool.',
  429: 'The caller\'s key is over its `requests_per_minute`.',
  501: 'The MCP server does not implement this kind of request.',
  502: 'The MCP server answered with an error (or the tool result has isError); `detail` carries its message.',
  503: 'The MCP server is down: starting, restarting after a failure, or its process exited.',
  504: 'The MCP server did not answer within the request timeout.',
};

/** Headers of some problem statuses. */
const PROBLEM_HEADERS: Record<number, Json> = {
  401: {
    'WWW-Authenticate': { description: 'The authentication scheme: `Bearer realm="encoder tools"`.', required: true, schema: { type: 'string' } },
  },
  429: {
    'Retry-After': { description: 'Seconds until the key may make its next request (rounded up, at least 1).', required: true, schema: { type: 'integer', minimum: 1 } },
  },
  503: {
    'Retry-After': {
      description:
        'Seconds until the server\'s next start attempt is due, or, while an attempt is under way, what its start-up timeout still leaves it (rounded up, at least 1). ' +
        'A request after that finds the server connected only if the attempt succeeds.',
      required: true,
      schema: { type: 'integer', minimum: 1 },
    },
  },
};

function problems(...statuses: number[]): Json {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        description: `${STATUS_CODES[status]}. ${PROBLEM_WHEN[status]}`,
        ...(PROBLEM_HEADERS[status] ? { headers: PROBLEM_HEADERS[status] } : {}),
        content: { [PROBLEM_TYPE]: { schema: ref('ErrorModel') } },
      },
    ]),
  );
}

const nameParameter = (name: string, description: string): Json => ({ name, in: 'path', required: true, description, schema: { type: 'string' } });
const serverParameter = (name = 'name') => nameParameter(name, 'The server\'s name in the configuration.');
const cursorParameter: Json = {
  name: 'cursor',
  in: 'query',
  required: false,
  description: 'The `nextCursor` of the previous page; passed to the MCP server as is.',
  schema: { type: 'string' },
};
/** Every request of the API can meet these when the server has API keys. */
const AUTH_FAILURES = [401, 403, 429];
/** Every request to an MCP server can meet these. */
const UPSTREAM_FAILURES = [400, ...AUTH_FAILURES, 404, 501, 502, 503, 504];
/** Every request with a body can meet these. */
const BODY_FAILURES = [413, 415];
/** Routes anyone may reach, with or without API keys. */
const OPEN: Json = { security: [] };

/** The OpenAPI 3.1 description of the whole tool server API. */
export function toolsOpenApiDocument(version: string): Json {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tool server',
      version,
      description:
        'An HTTP API in front of MCP servers: health, tools, prompts, resources and resource templates of each configured ' +
        'server. Errors are RFC 9457 problem details (application/problem+json). Every object response carries `$schema`, ' +
        'the address of its JSON Schema (served under /schemas/). Safe from web pages by default: every route refuses a Host ' +
        'that is not a name of this server and an Origin not listed in cors_allow_origins, and request bodies must be ' +
        'application/json (docs/tools.md, "Browsers").',
    },
    paths: {
      '/api/v1/health/servers': {
        get: {
          operationId: 'listServersHealth',
          summary: 'Health of every server',
          tags: ['health'],
          responses: { ...ok('Health of every configured server the caller\'s key may use, in configuration order.', ref('ServersHealthResponse')), ...problems(...AUTH_FAILURES) },
        },
      },
      '/api/v1/health/servers/{name}': {
        get: {
          operationId: 'getServerHealth',
          summary: 'Health of one server',
          tags: ['health'],
          parameters: [serverParameter()],
          responses: { ...ok('The server\'s health.', ref('ServerHealth')), ...problems(400, ...AUTH_FAILURES, 404) },
        },
      },
      '/api/v1/servers': {
        get: {
          operationId: 'listServers',
          summary: 'Names of the configured servers',
          tags: ['servers'],
          responses: { ...ok('Names of the servers the caller\'s key may use, in configuration order.', { type: ['array', 'null'], items: { type: 'string' } }), ...problems(...AUTH_FAILURES) },
        },
      },
      '/api/v1/servers/{name}/tools': {
        get: {
          operationId: 'listTools',
          summary: 'The server\'s tools (those of its allow-list, when it has one)',
          tags: ['tools'],
          parameters: [
            serverParameter(),
            {
              name: 'detail',
              in: 'query',
              required: false,
              description:
                'minimal: name and title; summary: plus description; full: every field including the schemas. Read as mcpd reads it: ' +
                'in any case, spaces around it ignored, and any other value (or a repeated one) means full.',
              schema: { type: 'string', enum: [...TOOL_DETAILS], default: 'full' },
            },
          ],
          responses: { ...ok('The tools.', ref('ToolsResponse')), ...problems(...UPSTREAM_FAILURES) },
        },
      },
      '/api/v1/servers/{server}/tools/{tool}': {
        post: {
          operationId: 'callTool',
          summary: 'Call a tool',
          description:
            'The body is the tool\'s arguments (a JSON object; an empty body means no arguments). The answer is a JSON ' +
            'string: the text of the result\'s text content items joined with a newline, or, when the result has no text ' +
            'but structured content, that content as JSON text.',
          tags: ['tools'],
          parameters: [serverParameter('server'), nameParameter('tool', 'The tool\'s name.')],
          requestBody: {
            required: false,
            content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
          },
          responses: { ...ok('The tool\'s answer.', { type: 'string' }), ...problems(...BODY_FAILURES, ...UPSTREAM_FAILURES) },
        },
      },
      '/api/v1/servers/{name}/prompts': {
        get: {
          operationId: 'listPrompts',
          summary: 'One page of the server\'s prompts',
          tags: ['prompts'],
          parameters: [serverParameter(), cursorParameter],
          responses: { ...ok('The prompts.', ref('Prompts')), ...problems(...UPSTREAM_FAILURES) },
        },
      },
      '/api/v1/servers/{name}/prompts/{promptName}': {
        post: {
          operationId: 'generatePrompt',
          summary: 'Render a prompt with arguments',
          tags: ['prompts'],
          parameters: [serverParameter(), nameParameter('promptName', 'The prompt\'s name.')],
          requestBody: { required: false, content: { 'application/json': { schema: ref('GeneratePromptRequest') } } },
          responses: { ...ok('The rendered messages.', ref('GeneratePromptResponse')), ...problems(...BODY_FAILURES, ...UPSTREAM_FAILURES) },
        },
      },
      '/api/v1/servers/{name}/resources': {
        get: {
          operationId: 'listResources',
          summary: 'One page of the server\'s resources',
          tags: ['resources'],
          parameters: [serverParameter(), cursorParameter],
          responses: { ...ok('The resources.', ref('Resources')), ...problems(...UPSTREAM_FAILURES) },
        },
      },
      '/api/v1/servers/{name}/resources/content': {
        get: {
          operationId: 'getResourceContent',
          summary: 'Read a resource',
          tags: ['resources'],
          parameters: [
            serverParameter(),
            { name: 'uri', in: 'query', required: true, description: 'The resource\'s URI.', schema: { type: 'string' } },
          ],
          responses: {
            ...ok('The resource\'s contents: text, or base64 `blob` for binary data.', { type: 'array', items: ref('ResourceContent') }),
            ...problems(...UPSTREAM_FAILURES),
          },
        },
      },
      '/api/v1/servers/{name}/resources/templates': {
        get: {
          operationId: 'listResourceTemplates',
          summary: 'One page of the server\'s resource templates',
          tags: ['resources'],
          parameters: [serverParameter(), cursorParameter],
          responses: { ...ok('The resource templates.', ref('ResourceTemplates')), ...problems(...UPSTREAM_FAILURES) },
        },
      },
      '/health': {
        get: {
          operationId: 'health',
          summary: 'Liveness of the tool server itself (each MCP server\'s health is under /api/v1/health)',
          tags: ['meta'],
          ...OPEN,
          responses: { ...ok('The tool server is up.', { const: 'OK' }), ...problems(403) },
        },
      },
      '/mcp': {
        post: {
          operationId: 'mcp',
          summary: 'MCP (Streamable HTTP, sessions): every server the key may use behind one endpoint',
          description:
            'Tools and prompts are named server__name; resources keep their URIs. A session (Mcp-Session-Id) belongs to the key that ' +
            'opened it. GET opens the session\'s stream of notifications (list changes); DELETE ends the session. See docs/tools.md.',
          tags: ['mcp'],
          requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } } } },
          responses: {
            200: { description: 'A JSON-RPC response, as JSON or as an SSE stream.', content: { 'application/json': { schema: { type: 'object' } }, 'text/event-stream': { schema: { type: 'string' } } } },
            ...problems(...AUTH_FAILURES, ...BODY_FAILURES),
          },
        },
      },
      '/metrics': {
        get: {
          operationId: 'metrics',
          summary: 'Prometheus metrics: requests and tool calls by server and status, latency, restarts, health',
          description: 'With API keys, only a key with servers: "*" may read them (they name every server and tool).',
          tags: ['meta'],
          responses: {
            200: { description: 'Prometheus text exposition format 0.0.4.', content: { 'text/plain': { schema: { type: 'string' } } } },
            ...problems(...AUTH_FAILURES),
          },
        },
      },
      '/openapi.json': {
        get: {
          operationId: 'openApi',
          ...OPEN,
          summary: 'This document',
          tags: ['meta'],
          responses: { ...ok('OpenAPI 3.1 document.', { type: 'object' }), ...problems(403) },
        },
      },
      '/docs': {
        get: {
          operationId: 'docs',
          ...OPEN,
          summary: 'This document, rendered by Swagger UI (served from here: nothing is fetched from elsewhere)',
          tags: ['meta'],
          responses: {
            200: {
              description: 'HTML page, with a Content-Security-Policy (only this server\'s scripts, styles and requests; no framing) and X-Frame-Options: DENY.',
              content: { 'text/html': { schema: { type: 'string' } } },
            },
            ...problems(403),
          },
        },
      },
      '/docs/{file}': {
        get: {
          operationId: 'getDocsFile',
          ...OPEN,
          summary: 'A file of Swagger UI, which /docs loads',
          tags: ['meta'],
          parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string', enum: [...SWAGGER_UI_FILES] } }],
          responses: {
            200: {
              description: 'The file.',
              content: { 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } } },
            },
            ...problems(400, 403, 404),
          },
        },
      },
      '/schemas/{schema}': {
        get: {
          operationId: 'getSchema',
          ...OPEN,
          summary: 'The JSON Schema of one object, the address of its `$schema`',
          tags: ['meta'],
          parameters: [
            {
              name: 'schema',
              in: 'path',
              required: true,
              description: 'The object\'s name with .json, e.g. ServerHealth.json.',
              schema: { type: 'string', enum: Object.keys(COMPONENT_SCHEMAS).map((name) => `${name}.json`) },
            },
          ],
          responses: {
            200: { description: 'JSON Schema 2020-12.', content: { 'application/schema+json': { schema: { type: 'object' } } } },
            ...problems(400, 403, 404),
          },
        },
      },
    },
    // Swagger UI's "Authorize" takes the key; operations without an empty `security` send it
    security: [{ apiKey: [] }],
    components: {
      schemas: COMPONENT_SCHEMAS,
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API key of auth.keys (`encoder tools keygen`). Without auth.keys the server asks for none.',
        },
      },
    },
  };
}
