import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import { FULL_ACCESS, type Access, type ApiKeys } from '../auth.ts';
import { ToolsError } from '../errors.ts';
import type { ApiOperation, OperationName } from '../operations.ts';
import type { Upstreams } from '../upstreams.ts';
import type { McpSessions } from './mcp-route.ts';
import { BrowserGuard, type BrowserAccess } from './browser-guard.ts';
import { DOCS_HEADERS, DOCS_PAGE, isSwaggerUiFile, SWAGGER_UI_FILES, SWAGGER_UI_TYPES, type SwaggerUiFile, type SwaggerUiFiles } from './docs-page.ts';
import { toolsOpenApiDocument } from './openapi.ts';
import { problemOf, schemaUrl, sendProblem } from './problem.ts';
import { COMPONENT_SCHEMAS, standaloneSchema } from './schemas.ts';
import {
  generatedPromptOf,
  promptsOf,
  resourceContentsOf,
  resourcesOf,
  resourceTemplatesOf,
  serverHealthOf,
  TOOL_DETAILS,
  toolAnswerOf,
  toolOf,
  type ToolDetail,
} from './views.ts';

export interface ToolsAppOptions {
  /** Largest request body; a larger one gets 413. Default 4 MiB. */
  bodyLimitBytes?: number;
  /** The version the OpenAPI document shows. */
  version: string;
  /** Swagger UI's files, served under /docs/. */
  swaggerUiFiles: SwaggerUiFiles;
  /** fastify's pino logger on stdout; default off. */
  logger?: boolean;
  /** The configured API keys, read at every request (a reload may change them); null or absent: no authentication. */
  keys?: () => ApiKeys | null;
  /** Told of every answered API request (metrics, audit log); the open routes are not API requests. */
  observe?: (operation: ApiOperation, key: string | null, status: number, ms: number) => void;
  /** Prometheus metrics served at GET /metrics (a key with every server may read them); absent: no route. */
  metrics?: Registry;
  /** The sessions of /mcp, one MCP endpoint for every server; absent: no /mcp. */
  mcp?: McpSessions;
  /** The address the server listens on, a Host it answers (browser-guard.ts); absent: the loopback names only. */
  listenHost?: string;
  /** allowed_hosts and cors_allow_origins, read at every request (a reload may change them); absent: none. */
  browserAccess?: () => BrowserAccess;
}

/** Routes anyone may reach: liveness, the API's description and the page that renders it (docs/tools.md). */
const OPEN_ROUTES = new Set(['/health', '/openapi.json', '/docs', '/docs/:file', '/schemas/:file']);

const JSON_TYPE = 'application/json; charset=utf-8';

type NameParams = { Params: { name: string } };

/**
 * The tool server's HTTP front end: /api/v1 (spec 3 Area A), /openapi.json, /docs and /schemas/<Name>.json.
 * Returned ready but not listening. It translates HTTP to calls on the upstreams and their ToolsErrors to
 * problem details; every failure leaves as application/problem+json.
 */
export async function createToolsApp(upstreams: Upstreams, options: ToolsAppOptions): Promise<FastifyInstance> {
  // when each request began, for the audit line's duration: before the guard, whose refusals are recorded too
  const startOf = new WeakMap<FastifyRequest, number>();
  const accessOf = new WeakMap<FastifyRequest, Access>();
  const recorded = new WeakSet<FastifyRequest>();
  /**
   * The one audit line and metrics count of an API request (docs/tools.md, "Metrics and audit"); a second call for
   * the same request does nothing, so that the ways an answer can leave (below) never count it twice.
   */
  const record = (request: FastifyRequest, status: number): void => {
    // a preflight is the browser's question, not an API request
    if (!options.observe || recorded.has(request) || OPEN_ROUTES.has(request.routeOptions.url ?? '') || isPreflight(request)) return;
    recorded.add(request);
    const given = accessOf.get(request);
    const operation = operationOf(request);
    // Names in the path of a request that was refused before authentication (Host, Origin, key) are the client's
    // choice, not a server or tool of this configuration: recorded without them (bounded metrics, see metrics.ts).
    options.observe(given ? operation : { operation: operation.operation, server: null, name: null }, given?.keyName ?? null, status, performance.now() - (startOf.get(request) ?? performance.now()));
  };
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: options.bodyLimitBytes ?? 4 * 2 ** 20,
    return503OnClosing: false,
    // Names in paths are MCP's: tool names up to 128 characters (more, percent-encoded); find-my-way's default of
    // 100 answered 414 for valid names. The URL as a whole stays bounded by Node's header size limit.
    // A trailing slash names the same route (`/api/v1/servers/`), as mcpd's router does.
    routerOptions: { maxParamLength: 8192, ignoreTrailingSlash: true },
    // A path the router cannot read (bad percent-encoding, a name beyond maxParamLength) is answered here, in a
    // context without the app's hooks: neither the guard nor onSend sees it, so its refusal is recorded here.
    frameworkErrors: (error, request, reply) => {
      sendProblem(request, reply.header('x-content-type-options', 'nosniff'), problemOf(error));
      record(request, reply.statusCode);
    },
  });

  // Bodies are JSON, said so by their Content-Type; any other type is a 415 (problem.ts), so that a web page's
  // "simple" request (text/plain, a form), which a browser sends without asking the server first, never reaches a
  // tool. An empty body means none.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (error) {
      done(new ToolsError('bad_request', `the request body is not valid JSON: ${(error as Error).message}`), undefined);
    }
  });

  app.setErrorHandler((error, request, reply) => {
    const problem = problemOf(error);
    if (problem.status >= 500 && !(error instanceof ToolsError)) request.log.error({ err: error }, problem.detail);
    return sendProblem(request, reply, problem);
  });
  app.setNotFoundHandler((request, reply) =>
    sendProblem(request, reply, { status: 404, detail: `no route ${request.method} ${request.url.split('?')[0]}` }),
  );

  // Host and Origin first, on every route (browser-guard.ts); then authentication before anything else: an unknown
  // route answers 401 too, so routes are not probed without a key.
  app.addHook('onRequest', async (request, reply) => {
    startOf.set(request, performance.now());
    // An answer written past fastify's onSend — /mcp's transport refusing a request itself (406 without an event
    // stream in Accept, a body that is no JSON-RPC message) after the route hijacked its reply — is recorded once it
    // closes. Its successes are not: the MCP server records each MCP request it answers.
    if (!options.observe) return;
    reply.raw.once('close', () => {
      if (reply.raw.headersSent && reply.raw.statusCode >= 400) record(request, reply.raw.statusCode);
    });
  });
  await new BrowserGuard({ listenHost: options.listenHost, access: options.browserAccess ?? (() => ({})) }).register(app);
  app.addHook('onRequest', async (request) => {
    if (OPEN_ROUTES.has(request.routeOptions.url ?? '')) return;
    const keys = options.keys?.();
    accessOf.set(request, keys ? keys.authenticate(request.headers.authorization, request.query as Record<string, unknown>) : FULL_ACCESS);
  });
  const access = (request: FastifyRequest): Access => accessOf.get(request) ?? FULL_ACCESS;
  /** The server of a request, when its key may use it: 403 (before "no such server") otherwise. */
  const permittedServer = (request: FastifyRequest, name: string) => {
    const given = access(request);
    if (!given.allowsServer(name)) throw new ToolsError('forbidden', `key "${given.keyName}" may not use server "${name}"`);
    return upstreams.get(name);
  };
  // Every answer fastify sends — a route's, the guard's refusal from its onRequest hook, a 415 from the content-type
  // parser, an error — is recorded as it is sent, not once it has been written (onResponse): a client that goes away
  // first still leaves its line.
  app.addHook('onSend', async (request, reply, payload) => {
    record(request, reply.statusCode);
    return payload;
  });
  const forbid = (request: FastifyRequest, what: string, server: string): never => {
    throw new ToolsError('forbidden', `key "${access(request).keyName}" may not use ${what} of server "${server}"`);
  };

  /** An object response with its `$schema` first. */
  const sendObject = (request: FastifyRequest, reply: FastifyReply, schema: string, body: Record<string, unknown>) =>
    reply.type(JSON_TYPE).send(JSON.stringify({ $schema: schemaUrl(schema), ...body }));
  const sendJson = (reply: FastifyReply, body: unknown) => reply.type(JSON_TYPE).send(JSON.stringify(body));

  const openApiJson = JSON.stringify(toolsOpenApiDocument(options.version));
  // liveness of the tool server itself (each MCP server's health is under /api/v1/health)
  app.get('/health', (_request, reply) => sendJson(reply, 'OK'));
  app.get('/openapi.json', (_request, reply) => reply.type(JSON_TYPE).send(openApiJson));
  app.get('/docs', (_request, reply) => reply.headers(DOCS_HEADERS).type('text/html; charset=utf-8').send(DOCS_PAGE));
  // read once (1.7 MB from a file or the SEA blob), then served from memory
  const swaggerUi = new Map<SwaggerUiFile, Buffer>();
  app.get<{ Params: { file: string } }>('/docs/:file', (request, reply) => {
    const { file } = request.params;
    if (!isSwaggerUiFile(file)) {
      return sendProblem(request, reply, { status: 404, detail: `no file "${file}" (files: ${SWAGGER_UI_FILES.join(', ')})` });
    }
    let content = swaggerUi.get(file);
    if (!content) {
      const bytes = options.swaggerUiFiles(file);
      content = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      swaggerUi.set(file, content);
    }
    return reply.type(SWAGGER_UI_TYPES[file]).header('cache-control', 'public, max-age=86400').send(content);
  });
  app.get<{ Params: { file: string } }>('/schemas/:file', (request, reply) => {
    const name = request.params.file.replace(/\.json$/, '');
    const schema = request.params.file.endsWith('.json') ? standaloneSchema(name, schemaUrl(name)) : undefined;
    if (!schema) {
      const known = Object.keys(COMPONENT_SCHEMAS).map((known) => `${known}.json`).join(', ');
      return sendProblem(request, reply, { status: 404, detail: `no schema "${request.params.file}" (schemas: ${known})` });
    }
    return reply.type('application/schema+json').send(JSON.stringify(schema));
  });

  options.mcp?.register(app, access);

  if (options.metrics) {
    const registry = options.metrics;
    app.get('/metrics', async (request, reply) => {
      // the series name every server and tool: only a key that may see them all reads them
      if (!access(request).everyServer) throw new ToolsError('forbidden', `key "${access(request).keyName}" may not read /metrics (it needs servers: "*")`);
      return reply.type(registry.contentType).send(await registry.metrics());
    });
  }

  app.get('/api/v1/health/servers', (request, reply) =>
    sendObject(request, reply, 'ServersHealthResponse', {
      servers: upstreams
        .all()
        .filter((upstream) => access(request).allowsServer(upstream.name))
        .map((upstream) => ({ $schema: schemaUrl('ServerHealth'), ...serverHealthOf(upstream.health()) })),
    }),
  );
  app.get<NameParams>('/api/v1/health/servers/:name', (request, reply) =>
    sendObject(request, reply, 'ServerHealth', serverHealthOf(permittedServer(request, request.params.name).health())),
  );
  app.get('/api/v1/servers', (request, reply) => sendJson(reply, upstreams.names().filter((name) => access(request).allowsServer(name))));

  app.get<NameParams & { Querystring: { detail?: string | string[] } }>('/api/v1/servers/:name/tools', async (request, reply) => {
    const detail = toolDetailOf(request.query.detail);
    const { name } = request.params;
    const tools = (await permittedServer(request, name).listTools(clientGone(reply))).filter((tool) => access(request).allowsTool(name, tool.name));
    return sendObject(request, reply, 'ToolsResponse', { tools: tools.map((tool) => toolOf(tool, detail)) });
  });

  app.post<{ Params: { name: string; tool: string }; Body: unknown }>('/api/v1/servers/:name/tools/:tool', async (request, reply) => {
    const upstream = permittedServer(request, request.params.name);
    if (!access(request).allowsTool(request.params.name, request.params.tool)) forbid(request, `tool "${request.params.tool}"`, request.params.name);
    const args = request.body === undefined ? {} : request.body;
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      throw new ToolsError('bad_request', `the request body must be a JSON object of the tool's arguments, not ${describe(args)}`);
    }
    const result = await upstream.callTool(request.params.tool, args as Record<string, unknown>, clientGone(reply));
    return sendJson(reply, toolAnswerOf(result));
  });

  app.get<NameParams & { Querystring: { cursor?: string | string[] } }>('/api/v1/servers/:name/prompts', async (request, reply) => {
    const { name } = request.params;
    const result = await permittedServer(request, name).listPrompts(cursorOf(request.query.cursor), clientGone(reply));
    const prompts = result.prompts.filter((prompt) => access(request).allowsPrompt(name, prompt.name));
    return sendObject(request, reply, 'Prompts', promptsOf({ ...result, prompts }));
  });

  app.post<{ Params: { name: string; prompt: string }; Body: unknown }>('/api/v1/servers/:name/prompts/:prompt', async (request, reply) => {
    const upstream = permittedServer(request, request.params.name);
    if (!access(request).allowsPrompt(request.params.name, request.params.prompt)) forbid(request, `prompt "${request.params.prompt}"`, request.params.name);
    const args = promptArgumentsOf(request.body);
    const result = await upstream.getPrompt(request.params.prompt, args, clientGone(reply));
    return sendObject(request, reply, 'GeneratePromptResponse', generatedPromptOf(result));
  });

  app.get<NameParams & { Querystring: { cursor?: string | string[] } }>('/api/v1/servers/:name/resources', async (request, reply) => {
    const { name } = request.params;
    const result = await permittedServer(request, name).listResources(cursorOf(request.query.cursor), clientGone(reply));
    const resources = result.resources.filter((resource) => access(request).allowsResource(name, resource.uri));
    return sendObject(request, reply, 'Resources', resourcesOf({ ...result, resources }));
  });

  app.get<NameParams & { Querystring: { uri?: string } }>('/api/v1/servers/:name/resources/content', async (request, reply) => {
    const upstream = permittedServer(request, request.params.name);
    const uri = request.query.uri;
    if (typeof uri !== 'string' || uri === '') throw new ToolsError('bad_request', 'the query parameter uri (the resource\'s URI) is required');
    if (!access(request).allowsResource(request.params.name, uri)) forbid(request, `resource "${uri}"`, request.params.name);
    return sendJson(reply, resourceContentsOf(await upstream.readResource(uri, clientGone(reply))));
  });

  app.get<NameParams & { Querystring: { cursor?: string | string[] } }>('/api/v1/servers/:name/resources/templates', async (request, reply) => {
    const { name } = request.params;
    const result = await permittedServer(request, name).listResourceTemplates(cursorOf(request.query.cursor), clientGone(reply));
    const resourceTemplates = access(request).allowsEveryResource(name) ? result.resourceTemplates : [];
    return sendObject(request, reply, 'ResourceTemplates', resourceTemplatesOf({ ...result, resourceTemplates }));
  });

  await app.ready();
  return app;
}

/** Route (fastify's pattern) → operation; the names are the route's parameters. */
const OPERATIONS: Record<string, OperationName> = {
  '/api/v1/health/servers': 'health',
  '/api/v1/health/servers/:name': 'health',
  '/api/v1/servers': 'list_servers',
  '/api/v1/servers/:name/tools': 'list_tools',
  '/api/v1/servers/:name/tools/:tool': 'call_tool',
  '/api/v1/servers/:name/prompts': 'list_prompts',
  '/api/v1/servers/:name/prompts/:prompt': 'get_prompt',
  '/api/v1/servers/:name/resources': 'list_resources',
  '/api/v1/servers/:name/resources/content': 'read_resource',
  '/api/v1/servers/:name/resources/templates': 'list_resource_templates',
  '/metrics': 'metrics',
  // refusals of /mcp as a whole (no session, another key's session); each MCP request is recorded by the MCP server
  '/mcp': 'mcp',
};

/** What a request asked for, from its route, parameters and body. */
function operationOf(request: FastifyRequest): ApiOperation {
  const operation = OPERATIONS[request.routeOptions.url ?? ''] ?? 'unknown_route';
  const params = (request.params ?? {}) as Record<string, string | undefined>;
  const server = operation === 'unknown_route' ? null : (params.name ?? null);
  const body = request.body as Record<string, unknown> | undefined;
  switch (operation) {
    case 'call_tool':
      return { operation, server, name: params.tool ?? null, arguments: body };
    case 'get_prompt':
      return { operation, server, name: params.prompt ?? null, arguments: body?.arguments };
    case 'read_resource': {
      const uri = (request.query as { uri?: unknown }).uri;
      return { operation, server, name: typeof uri === 'string' ? uri : null };
    }
    default:
      return { operation, server, name: null };
  }
}

/**
 * Request options whose signal is aborted when the client goes away before its answer is sent: the request to the
 * MCP server is then cancelled (MCP notifications/cancelled) rather than left running for nobody.
 */
function clientGone(reply: FastifyReply): { signal: AbortSignal } {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    // `sent`: light-my-request (inject) closes its response before marking it finished
    if (!reply.sent && !reply.raw.writableFinished) controller.abort(new Error('the client closed the connection before the answer'));
  });
  return { signal: controller.signal };
}

/**
 * `?detail=` as mcpd reads it: case and surrounding spaces do not matter, and a value that is none of minimal,
 * summary, full (or a repeated one) means full — the safe default — rather than an error.
 */
function toolDetailOf(given: unknown): ToolDetail {
  const detail = typeof given === 'string' ? given.trim().toLowerCase() : '';
  return (TOOL_DETAILS as readonly string[]).includes(detail) ? (detail as ToolDetail) : 'full';
}

function isPreflight(request: FastifyRequest): boolean {
  return request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined;
}

/** The one `cursor` of a list request; repeated (`?cursor=a&cursor=b`) it is no cursor at all. */
function cursorOf(cursor: string | string[] | undefined): string | undefined {
  if (Array.isArray(cursor)) throw new ToolsError('bad_request', 'the query parameter cursor is given more than once');
  return cursor;
}

/** `{arguments: {string: string}}`, or nothing; anything else is a 400 that says what is wrong. */
function promptArgumentsOf(body: unknown): Record<string, string> {
  if (body === undefined) return {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ToolsError('bad_request', `the request body must be a JSON object {"arguments": {...}}, not ${describe(body)}`);
  }
  const unknown = Object.keys(body).filter((key) => key !== 'arguments');
  if (unknown.length > 0) throw new ToolsError('bad_request', `unknown field(s) in the request body: ${unknown.join(', ')}; only "arguments" is allowed`);
  const args = (body as { arguments?: unknown }).arguments;
  if (args === undefined) return {};
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw new ToolsError('bad_request', `"arguments" must be an object of strings, not ${describe(args)}`);
  }
  for (const [key, value] of Object.entries(args)) {
    if (typeof value !== 'string') throw new ToolsError('bad_request', `argument "${key}" must be a string, not ${describe(value)}`);
  }
  return args as Record<string, string>;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}
