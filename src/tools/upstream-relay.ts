import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
  type ClientCapabilities,
  type CreateMessageRequest,
  type ElicitRequest,
  type ListRootsRequest,
  type LoggingMessageNotification,
  type PromptListChangedNotification,
  type ResourceListChangedNotification,
  type ResourceUpdatedNotification,
  type ToolListChangedNotification,
} from '@modelcontextprotocol/sdk/types.js';

/** What an MCP server sends of its own accord that a client of /mcp may want: passed on by an UpstreamRelay. */
export type RelayedNotification =
  | LoggingMessageNotification
  | ResourceUpdatedNotification
  | ToolListChangedNotification
  | PromptListChangedNotification
  | ResourceListChangedNotification;

/** The requests an MCP server makes of its client: answered by a client of /mcp, or refused. */
export type RelayedRequest = CreateMessageRequest | ElicitRequest | ListRootsRequest;

/**
 * Where an upstream server's notifications and server-to-client requests go (the sessions of /mcp,
 * src/tools/mcp/session-relay.ts). `request` rejects (an McpError the server receives) when no session can answer.
 */
export interface UpstreamRelay {
  notification(server: string, notification: RelayedNotification): void;
  /** `signal` aborts when the server cancels its request (notifications/cancelled) or the session ends. */
  request(server: string, request: RelayedRequest, signal: AbortSignal): Promise<Record<string, unknown>>;
  /** A server's session started (first or after a restart): state the sessions set on it is set again. */
  connected(server: string): void;
}

/**
 * What the tool server's MCP client tells servers it can do when it has a relay: sampling, elicitation (form and URL)
 * and roots, each forwarded to the /mcp session whose request is under way on that server (docs/tools.md, "/mcp").
 */
export const RELAYED_CLIENT_CAPABILITIES: ClientCapabilities = { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} };

/**
 * Sends what `client`'s server sends of its own accord to `relay`, while `current()` says the session is the
 * server's current one; `toolsChanged` is told of tools/list_changed first (the tool list cache).
 */
export function relayFrom(client: Client, server: string, relay: UpstreamRelay, current: () => boolean, toolsChanged: () => void): void {
  const pass = (notification: RelayedNotification) => {
    if (current()) relay.notification(server, notification);
  };
  client.setNotificationHandler(LoggingMessageNotificationSchema, pass);
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, pass);
  client.setNotificationHandler(PromptListChangedNotificationSchema, pass);
  client.setNotificationHandler(ResourceListChangedNotificationSchema, pass);
  client.setNotificationHandler(ToolListChangedNotificationSchema, (notification) => {
    if (!current()) return;
    toolsChanged();
    relay.notification(server, notification);
  });
  // the SDK client checks each answer against the request's result schema before the server gets it
  client.setRequestHandler(CreateMessageRequestSchema, (request, extra) => relay.request(server, request, extra.signal) as never);
  client.setRequestHandler(ElicitRequestSchema, (request, extra) => relay.request(server, request, extra.signal) as never);
  client.setRequestHandler(ListRootsRequestSchema, (request, extra) => relay.request(server, request, extra.signal) as never);
}
