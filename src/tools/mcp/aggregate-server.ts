import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type Progress,
  type Prompt,
  type Resource,
  type ResourceTemplate,
} from '@modelcontextprotocol/sdk/types.js';
import type { Access } from '../auth.ts';
import { mcpMessageOf, RESOURCE_NOT_FOUND, STATUS_OF_KIND, ToolsError } from '../errors.ts';
import type { ApiOperation } from '../operations.ts';
import type { Upstream } from '../upstream.ts';
import type { RequestOptions } from '../upstream-requests.ts';
import type { Upstreams } from '../upstreams.ts';
import { NAMESPACE_SEPARATOR, type Extra, type SessionRelay } from './session-relay.ts';

export { NAMESPACE_SEPARATOR } from './session-relay.ts';
/** Pages of one server's list read for one aggregated list, at most (a server whose cursors never end stops here). */
const MAX_PAGES = 100;

export interface AggregateServerOptions {
  version: string;
  /** What the session's key may use now (a reload may change it). */
  access: () => Access;
  /** Told of every request, as the HTTP API's are (metrics, audit log). */
  observe?: (operation: ApiOperation, key: string | null, status: number, ms: number) => void;
  /** What the servers send of their own accord, to and from this session. */
  relay: SessionRelay;
}

/** A JSON-RPC error as the SDK's Protocol sends it (code and message as they are; McpError would prefix the message). */
class JsonRpcError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

/** A ToolsError (or anything) as the JSON-RPC error an MCP client expects; an MCP server's own error passes through. */
function jsonRpcErrorOf(error: unknown): JsonRpcError {
  if (error instanceof ToolsError) {
    const cause = error.cause;
    if (cause instanceof McpError && (error.kind === 'upstream' || error.kind === 'bad_request' || error.kind === 'not_found')) {
      return new JsonRpcError(cause.code, mcpMessageOf(cause));
    }
    const code = { bad_request: ErrorCode.InvalidParams, not_found: ErrorCode.InvalidParams, forbidden: ErrorCode.InvalidParams, not_implemented: ErrorCode.MethodNotFound }[
      error.kind as string
    ];
    return new JsonRpcError(code ?? ErrorCode.InternalError, error.message);
  }
  return new JsonRpcError(ErrorCode.InternalError, error instanceof Error ? error.message : String(error));
}

/**
 * One MCP server (an SDK `Server`, one per client session) in front of every configured server the session's key may
 * use: tools and prompts named `server__name`, resources under their own URIs (names prefixed), each request passed
 * to its server with the client's cancellation. A server that is down or lacks a capability is left out of lists.
 */
export function createAggregateServer(upstreams: Upstreams, options: AggregateServerOptions): Server {
  const server = new Server(
    { name: 'encoder-tools', version: options.version },
    { capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: { subscribe: true, listChanged: true }, logging: {} } },
  );
  // every request reads the key's current permissions: `access` below is a view of them
  const access: Access = {
    get keyName() {
      return options.access().keyName;
    },
    get everyServer() {
      return options.access().everyServer;
    },
    allowsServer: (name) => options.access().allowsServer(name),
    allowsTool: (name, tool) => options.access().allowsTool(name, tool),
    allowsPrompt: (name, prompt) => options.access().allowsPrompt(name, prompt),
    allowsResource: (name, uri) => options.access().allowsResource(name, uri),
    allowsEveryResource: (name) => options.access().allowsEveryResource(name),
  };
  /** Which server listed a resource URI, from the session's last resources/list. */
  const owners = new Map<string, string>();
  // MCP SDK clients ignore a cancellation of request id 0 (`if (!requestId) return` in Protocol._oncancel): this
  // server's requests to its client (relayed sampling, elicitation, roots) start at 1, so that each can be cancelled
  const ids = server as unknown as { _requestMessageId?: number };
  if (ids._requestMessageId === 0) ids._requestMessageId = 1;
  const { relay } = options;
  const session = relay.attach(server, access);
  server.onclose = () => relay.detach(session);
  /**
   * What a request to one server carries of the client's: its cancellation, its `_meta`, and its progress token
   * (the server's progress notifications are sent on to the client under the client's token). The request is known
   * to the relay while under way, so that what the server sends meanwhile reaches this session.
   */
  const forward = <T>(upstream: Upstream, extra: Extra, run: (options: RequestOptions) => Promise<T>): Promise<T> => {
    const progressToken = extra._meta?.progressToken;
    const onprogress =
      progressToken === undefined
        ? undefined
        : (progress: Progress) => void extra.sendNotification({ method: 'notifications/progress', params: { ...progress, progressToken } }).catch(() => {});
    return relay.underway(session, upstream.name, extra, () => run({ signal: extra.signal, meta: extra._meta, onprogress }));
  };

  const permitted = () => upstreams.all().filter((upstream) => access.allowsServer(upstream.name) && upstream.state === 'connected');
  /** `server__name` → the server and the name, the longest configured server name first (names may contain "__"). */
  const split = (namespaced: string, what: string): [Upstream, string] => {
    const candidates = upstreams.names().filter((name) => namespaced.startsWith(`${name}${NAMESPACE_SEPARATOR}`));
    const name = candidates.sort((a, b) => b.length - a.length)[0];
    if (name === undefined || !access.allowsServer(name)) throw new ToolsError('not_found', `no ${what} "${namespaced}" (names are server${NAMESPACE_SEPARATOR}${what})`);
    return [upstreams.get(name), namespaced.slice(name.length + NAMESPACE_SEPARATOR.length)];
  };
  /** Runs a request, telling `observe` its outcome; failures leave as JSON-RPC errors. */
  const observed = async <T>(operation: ApiOperation, run: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    let status = 200;
    try {
      return await run();
    } catch (error) {
      status = error instanceof ToolsError ? STATUS_OF_KIND[error.kind] : 500;
      throw jsonRpcErrorOf(error);
    } finally {
      options.observe?.(operation, access.keyName, status, performance.now() - started);
    }
  };
  /** Every page of a cursor list, or nothing when the server cannot list (down, no such capability). */
  const allPages = async <T>(list: (cursor: string | undefined) => Promise<{ nextCursor?: string } & Record<string, unknown>>, key: string): Promise<T[]> => {
    const items: T[] = [];
    let cursor: string | undefined;
    try {
      for (let page = 0; page < MAX_PAGES; page++) {
        const result = await list(cursor);
        items.push(...((result[key] as T[] | undefined) ?? []));
        cursor = result.nextCursor;
        if (!cursor) break;
      }
    } catch (error) {
      if (!(error instanceof ToolsError)) throw error;
    }
    return items;
  };

  server.setRequestHandler(ListToolsRequestSchema, (_request, extra) =>
    observed({ operation: 'list_tools', server: null, name: null }, async () => {
      const lists = await Promise.all(
        permitted().map(async (upstream) => {
          const tools = await upstream.listTools({ signal: extra.signal }).catch((error: unknown) => {
            if (error instanceof ToolsError) return [];
            throw error;
          });
          return tools
            .filter((tool) => access.allowsTool(upstream.name, tool.name))
            .map((tool) => ({ ...tool, name: `${upstream.name}${NAMESPACE_SEPARATOR}${tool.name}` }));
        }),
      );
      return { tools: lists.flat() };
    }),
  );

  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const [upstream, tool] = (() => {
      try {
        return split(request.params.name, 'tool');
      } catch (error) {
        throw jsonRpcErrorOf(error);
      }
    })();
    return observed({ operation: 'call_tool', server: upstream.name, name: tool, arguments: request.params.arguments }, async () => {
      if (!access.allowsTool(upstream.name, tool)) throw new ToolsError('forbidden', `key "${access.keyName}" may not use tool "${tool}" of server "${upstream.name}"`);
      return forward(upstream, extra, (forwarded) => upstream.callToolAsIs(tool, request.params.arguments ?? {}, forwarded));
    });
  });

  server.setRequestHandler(ListPromptsRequestSchema, (_request, extra) =>
    observed({ operation: 'list_prompts', server: null, name: null }, async () => {
      const lists = await Promise.all(
        permitted().map(async (upstream) =>
          (await allPages<Prompt>((cursor) => upstream.listPrompts(cursor, { signal: extra.signal }), 'prompts'))
            .filter((prompt) => access.allowsPrompt(upstream.name, prompt.name))
            .map((prompt) => ({ ...prompt, name: `${upstream.name}${NAMESPACE_SEPARATOR}${prompt.name}` })),
        ),
      );
      return { prompts: lists.flat() };
    }),
  );

  server.setRequestHandler(GetPromptRequestSchema, (request, extra) => {
    const [upstream, prompt] = (() => {
      try {
        return split(request.params.name, 'prompt');
      } catch (error) {
        throw jsonRpcErrorOf(error);
      }
    })();
    return observed({ operation: 'get_prompt', server: upstream.name, name: prompt, arguments: request.params.arguments }, async () => {
      if (!access.allowsPrompt(upstream.name, prompt)) throw new ToolsError('forbidden', `key "${access.keyName}" may not use prompt "${prompt}" of server "${upstream.name}"`);
      return forward(upstream, extra, (forwarded) => upstream.getPrompt(prompt, request.params.arguments ?? {}, forwarded));
    });
  });

  server.setRequestHandler(ListResourcesRequestSchema, (_request, extra) =>
    observed({ operation: 'list_resources', server: null, name: null }, async () => {
      const lists = await Promise.all(
        permitted().map(async (upstream) =>
          (await allPages<Resource>((cursor) => upstream.listResources(cursor, { signal: extra.signal }), 'resources'))
            .filter((resource) => access.allowsResource(upstream.name, resource.uri))
            .map((resource) => {
              owners.set(resource.uri, upstream.name);
              return { ...resource, name: `${upstream.name}${NAMESPACE_SEPARATOR}${resource.name}` };
            }),
        ),
      );
      return { resources: lists.flat() };
    }),
  );

  server.setRequestHandler(ListResourceTemplatesRequestSchema, (_request, extra) =>
    observed({ operation: 'list_resource_templates', server: null, name: null }, async () => {
      const lists = await Promise.all(
        permitted()
          .filter((upstream) => access.allowsEveryResource(upstream.name))
          .map(async (upstream) =>
            (await allPages<ResourceTemplate>((cursor) => upstream.listResourceTemplates(cursor, { signal: extra.signal }), 'resourceTemplates')).map((template) => ({
              ...template,
              name: `${upstream.name}${NAMESPACE_SEPARATOR}${template.name}`,
            })),
          ),
      );
      return { resourceTemplates: lists.flat() };
    }),
  );

  server.setRequestHandler(ReadResourceRequestSchema, (request, extra) => {
    const { uri } = request.params;
    const owner = owners.get(uri);
    return observed({ operation: 'read_resource', server: owner ?? null, name: uri }, async () => {
      // a URI not listed in this session (a template's, or listed elsewhere): the servers that may serve it, in order
      const candidates = owner !== undefined ? permitted().filter((upstream) => upstream.name === owner) : permitted().filter((upstream) => access.allowsEveryResource(upstream.name));
      for (const upstream of candidates) {
        if (!access.allowsResource(upstream.name, uri)) continue;
        try {
          return await forward(upstream, extra, (forwarded) => upstream.readResource(uri, forwarded));
        } catch (error) {
          if (owner !== undefined || !(error instanceof ToolsError) || (error.kind !== 'not_found' && error.kind !== 'not_implemented')) throw error;
        }
      }
      throw new ToolsError('not_found', `no server this key may use has resource "${uri}"`, { cause: new McpError(RESOURCE_NOT_FOUND, `Resource not found: ${uri}`) });
    });
  });

  server.setRequestHandler(SubscribeRequestSchema, (request, extra) => {
    const { uri } = request.params;
    return observed({ operation: 'subscribe_resource', server: owners.get(uri) ?? null, name: uri }, async () => {
      await relay.subscribe(session, subscriptionServer(uri), uri, extra);
      return {};
    });
  });

  server.setRequestHandler(UnsubscribeRequestSchema, (request, extra) =>
    observed({ operation: 'unsubscribe_resource', server: owners.get(request.params.uri) ?? null, name: request.params.uri }, async () => {
      if (!(await relay.unsubscribe(session, request.params.uri, extra))) throw new ToolsError('bad_request', `this session has no subscription to "${request.params.uri}"`);
      return {};
    }),
  );

  server.setRequestHandler(SetLevelRequestSchema, (request) =>
    observed({ operation: 'set_logging_level', server: null, name: request.params.level }, async () => {
      await relay.setLevel(session, request.params.level, permitted());
      return {};
    }),
  );

  /** The server that serves `uri`: the one that listed it, else the only one that may serve any URI and offers subscriptions. */
  const subscriptionServer = (uri: string): Upstream => {
    const owner = owners.get(uri);
    const candidates = permitted().filter((upstream) =>
      owner !== undefined ? upstream.name === owner : access.allowsEveryResource(upstream.name) && upstream.capabilities?.resources?.subscribe,
    );
    if (candidates.length !== 1 || !access.allowsResource(candidates[0].name, uri)) {
      throw new ToolsError(
        candidates.length > 1 ? 'bad_request' : 'not_found',
        candidates.length > 1 ? `several servers may serve "${uri}": list resources (resources/list) first, so that its server is known` : `no server this key may use offers a subscription to "${uri}"`,
      );
    }
    return candidates[0];
  };

  return server;
}
