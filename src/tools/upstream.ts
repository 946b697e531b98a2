import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ErrorCode,
  McpError,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type GetPromptResult,
  type ListPromptsResult,
  type ListResourcesResult,
  type ListResourceTemplatesResult,
  type LoggingLevel,
  type ReadResourceResult,
  type ServerCapabilities,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from './config.ts';
import { mcpMessageOf, ToolsError, toolsErrorOf } from './errors.ts';
import { cancelled, collectPages, forwardedMeta, matchesTemplate, ProgressRoutes, textOf, type RequestOptions } from './upstream-requests.ts';
import { RELAYED_CLIENT_CAPABILITIES, relayFrom, type UpstreamRelay } from './upstream-relay.ts';
import { createUpstreamTransport, pidOf, sessionRejected, terminateHttpSession } from './upstream-transport.ts';

/** ok: the last ping was answered; timeout: it was not answered in time; unreachable: no session or the ping
 * failed; unknown: not checked yet. */
export type HealthStatus = 'ok' | 'timeout' | 'unreachable' | 'unknown';

export interface Health {
  name: string;
  status: HealthStatus;
  lastChecked?: Date;
  lastSuccessful?: Date;
  /** Round trip of the last answered ping, milliseconds. */
  latencyMs?: number;
  /** Why the last check failed, when it did. */
  detail?: string;
}

/** The session's life: connecting (first start or restart), connected, waiting to retry, stopped for good. */
export type UpstreamState = 'connecting' | 'connected' | 'backoff' | 'stopped';

export interface UpstreamOptions {
  /** Lines about the server's life and its stderr; default: dropped. */
  log?: (line: string) => void;
  clientInfo?: { name: string; version: string };
  /** Called when a session starts; `restart` is true for every session after the server's first. */
  onSession?: (server: string, restart: boolean) => void;
  /** Where the server's notifications and requests to its client go; without one, the client offers no capability. */
  relay?: UpstreamRelay;
}

/** What the SDK client throws (as invalid params, -32602) when a tool's structuredContent breaks its outputSchema. */
const SDK_OUTPUT_CHECK = /^MCP error -32602: (Structured content does not match the tool's output schema|Failed to validate structured content)/;
const STDERR_TAIL_LINES = 20;

/**
 * One configured MCP server: its MCP session through @modelcontextprotocol/sdk, restarted with exponential
 * backoff when it fails to start or its process exits, health from periodic pings, and the requests of the API,
 * each bounded by the request timeout and each failure turned into a ToolsError.
 */
export class Upstream {
  /** Changes only in its allow-list (`allowOnly`); any other change makes a new Upstream. */
  config: ServerConfig;
  private readonly log: (line: string) => void;
  private readonly clientInfo: { name: string; version: string };
  private readonly onSession: (server: string, restart: boolean) => void;
  private readonly relay: UpstreamRelay | undefined;
  private readonly progress = new ProgressRoutes();
  /** Sessions this server has had (the first, then one per restart). */
  private sessions = 0;
  private client: Client | undefined;
  private transport: Transport | undefined;
  private stateValue: UpstreamState = 'connecting';
  /** Each connection attempt's number; events of an older attempt are ignored. */
  private generation = 0;
  private failures = 0;
  private connectedAt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  /** When retryTimer fires (Date.now() clock), while waiting in backoff. */
  private nextAttemptAt: number | undefined;
  /** When the start attempt under way began (state 'connecting'). */
  private attemptStartedAt: number | undefined;
  private healthTimer: NodeJS.Timeout | undefined;
  private healthValue: Health;
  private lastError: string | undefined;
  private toolsCache: Tool[] | undefined;
  /** Every tool name the server has listed (kept across sessions): the tools metrics may name. */
  private readonly listedToolNames = new Set<string>();
  private allowed: Set<string> | undefined;
  private stderrTail: string[] = [];
  /** Health pings of this session not answered in a row; restart.afterPingTimeouts of them end it. */
  private pingTimeouts = 0;
  /** A health ping is under way (one at a time: transport errors can ask for one besides the interval). */
  private pinging = false;
  /** The client of a connection attempt in progress, closed by `close` so that no child outlives it. */
  private connecting: { client: Client; transport: Transport } | undefined;
  private readonly firstAttempt: Promise<void>;
  /** Requests under way; `drained` is called when the count falls to zero while retiring. */
  private inFlight = 0;
  private drained: (() => void) | undefined;
  /** Being replaced or removed by a reload: finish the requests under way, never reconnect. */
  private retiring = false;
  private endFirstAttempt: () => void = () => {};

  constructor(config: ServerConfig, options: UpstreamOptions = {}) {
    this.config = config;
    this.log = options.log ?? (() => {});
    this.clientInfo = options.clientInfo ?? { name: 'encoder-tools', version: '0.0.0' };
    this.onSession = options.onSession ?? (() => {});
    this.relay = options.relay;
    this.allowed = config.tools ? new Set(config.tools) : undefined;
    this.healthValue = { name: config.name, status: 'unknown' };
    this.firstAttempt = new Promise((resolve) => (this.endFirstAttempt = resolve));
  }

  get name(): string {
    return this.config.name;
  }

  get state(): UpstreamState {
    return this.stateValue;
  }

  /** A new entry that differs from the current one only in its allow-list: applied now, the session (and process) kept. */
  allowOnly(config: ServerConfig): void {
    this.config = config;
    this.allowed = config.tools ? new Set(config.tools) : undefined;
  }

  /** Starts connecting in the background; failures are retried, never thrown. */
  start(): void {
    void this.connect();
  }

  /** Resolves when the first start attempt has ended, connected or not (at most the start-up timeout). */
  firstAttemptSettled(): Promise<void> {
    return this.firstAttempt;
  }

  /** Why the last start failed or the session was lost; undefined while connected. */
  get lastFailure(): string | undefined {
    return this.lastError;
  }

  /** Resolves once connected, or rejects with the last error after `timeoutMs`. For tests and start-up banners. */
  async waitConnected(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.stateValue !== 'connected') {
      if (this.stateValue === 'stopped') throw new Error(`server "${this.name}" is stopped`);
      if (Date.now() > deadline) throw new Error(`server "${this.name}" did not connect in ${timeoutMs} ms: ${this.lastError ?? 'still starting'}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  health(): Health {
    return { ...this.healthValue };
  }

  /** The process id of a stdio server's current process. */
  get pid(): number | undefined {
    return pidOf(this.transport ?? this.connecting?.transport);
  }

  async close(): Promise<void> {
    this.stateValue = 'stopped';
    this.endFirstAttempt();
    this.generation++;
    clearTimeout(this.retryTimer);
    clearInterval(this.healthTimer);
    await Promise.all([this.connecting?.client.close().catch(() => {}), this.dropSession()]);
  }

  // ---- requests ------------------------------------------------------------------------------------------
  // Each is counted while under way, so that a reload can let it finish before closing the session (retire).

  // `signal` aborts a request (its caller went away): the MCP server is sent notifications/cancelled for it, and
  // the request fails with kind `cancelled`, which counts against nothing (not the server's health, not a restart).

  /** All of the server's tools that the allow-list lets through, every page. */
  listTools(options: RequestOptions = {}): Promise<Tool[]> {
    return this.tracked(options, (signal) => this.listToolsNow(signal));
  }

  /** A tool's result; one with isError is a ToolsError `upstream` (the API answers 502 for it). */
  callTool(name: string, args: Record<string, unknown>, options: RequestOptions = {}): Promise<CallToolResult> {
    return this.tracked(options, async (signal) => {
      const result = await this.callToolNow(name, args, signal);
      if (result.isError) {
        const text = textOf(result) || JSON.stringify(result.structuredContent ?? result.content);
        throw new ToolsError('upstream', `tool "${name}" of server "${this.name}" returned an error: ${text}`);
      }
      return result;
    });
  }

  /** A tool's result as the server gave it, isError included: MCP clients read isError themselves (/mcp). */
  callToolAsIs(name: string, args: Record<string, unknown>, options: RequestOptions = {}): Promise<CallToolResult> {
    return this.tracked(options, (signal) => this.callToolNow(name, args, signal, options));
  }

  listPrompts(cursor: string | undefined, options: RequestOptions = {}): Promise<ListPromptsResult> {
    return this.tracked(options, (signal) => this.listPromptsNow(cursor, signal));
  }

  getPrompt(name: string, args: Record<string, string>, options: RequestOptions = {}): Promise<GetPromptResult> {
    return this.tracked(options, (signal) => this.getPromptNow(name, args, signal, options));
  }

  listResources(cursor: string | undefined, options: RequestOptions = {}): Promise<ListResourcesResult> {
    return this.tracked(options, (signal) => this.listResourcesNow(cursor, signal));
  }

  listResourceTemplates(cursor: string | undefined, options: RequestOptions = {}): Promise<ListResourceTemplatesResult> {
    return this.tracked(options, (signal) => this.listResourceTemplatesNow(cursor, signal));
  }

  readResource(uri: string, options: RequestOptions = {}): Promise<ReadResourceResult> {
    return this.tracked(options, (signal) => this.readResourceNow(uri, signal, options));
  }

  /** resources/subscribe: the server then sends notifications/resources/updated for `uri` (to the relay). */
  subscribeResource(uri: string, options: RequestOptions = {}): Promise<void> {
    return this.tracked(options, async (signal) => {
      const client = this.session('resources');
      if (!client.getServerCapabilities()?.resources?.subscribe) throw new ToolsError('not_implemented', `server "${this.name}" does not offer resource subscriptions`);
      await this.request(`resources/subscribe "${uri}"`, client, () => client.subscribeResource({ uri, ...forwardedMeta(options) }, this.requestOptions(signal)));
    });
  }

  unsubscribeResource(uri: string, options: RequestOptions = {}): Promise<void> {
    return this.tracked(options, async (signal) => {
      const client = this.session('resources');
      await this.request(`resources/unsubscribe "${uri}"`, client, () => client.unsubscribeResource({ uri, ...forwardedMeta(options) }, this.requestOptions(signal)));
    });
  }

  /** logging/setLevel: the least severe level the server's log messages (to the relay) should have. */
  setLoggingLevel(level: LoggingLevel, options: RequestOptions = {}): Promise<void> {
    return this.tracked(options, async (signal) => {
      const client = this.session('logging');
      await this.request('logging/setLevel', client, () => client.setLoggingLevel(level, this.requestOptions(signal)));
    });
  }

  /** What the server offers (its answer to initialize), while connected. */
  get capabilities(): ServerCapabilities | undefined {
    return this.stateValue === 'connected' ? this.client?.getServerCapabilities() : undefined;
  }

  /**
   * Milliseconds a caller should wait before trying again: in backoff, until the next start attempt is due; while an
   * attempt is under way, what its start-up timeout still leaves it; else 0.
   */
  nextAttemptInMs(): number {
    if (this.stateValue === 'connecting' && this.attemptStartedAt !== undefined) {
      return Math.max(0, this.attemptStartedAt + this.config.timeouts.startup - Date.now());
    }
    if (this.stateValue !== 'backoff' || this.nextAttemptAt === undefined) return 0;
    return Math.max(0, this.nextAttemptAt - Date.now());
  }

  /** How many requests to this server are under way. */
  get requestsUnderWay(): number {
    return this.inFlight;
  }

  /**
   * Closes the session once the requests under way have ended (each is bounded by the request timeout; so is the
   * wait), without reconnecting meanwhile: a reload that changes or removes this server does not cut calls short.
   */
  async retire(): Promise<void> {
    this.retiring = true;
    clearTimeout(this.retryTimer);
    this.nextAttemptAt = undefined;
    if (this.inFlight > 0) {
      await new Promise<void>((resolve) => {
        this.drained = resolve;
        setTimeout(resolve, this.config.timeouts.request).unref();
      });
    }
    await this.close();
  }

  private async tracked<T>(options: RequestOptions, run: (signal: AbortSignal | undefined) => Promise<T>): Promise<T> {
    const { signal } = options;
    this.inFlight++;
    try {
      if (signal?.aborted) throw cancelled(this.name, signal);
      return await run(signal);
    } catch (error) {
      // Whatever the request ran into after its caller left (the SDK's rejection is the abort reason, as a timeout).
      if (signal?.aborted) {
        const failure = cancelled(this.name, signal, error);
        this.log(`[${this.name}] ${failure.message}`);
        throw failure;
      }
      // A 503 says when to try again: when the next start attempt is due.
      if (error instanceof ToolsError && error.kind === 'unavailable') error.retryAfterMs = this.nextAttemptInMs();
      throw error;
    } finally {
      if (--this.inFlight === 0) this.drained?.();
    }
  }

  /** Whether the server has listed this tool (and its allow-list allows it): metrics name only such tools. */
  hasListedTool(name: string): boolean {
    return (this.allowed?.has(name) ?? true) && this.listedToolNames.has(name);
  }

  private async listToolsNow(signal: AbortSignal | undefined): Promise<Tool[]> {
    const tools = await this.fetchAllTools(signal);
    return this.allowed ? tools.filter((tool) => this.allowed!.has(tool.name)) : tools;
  }

  private async callToolNow(name: string, args: Record<string, unknown>, signal: AbortSignal | undefined, forwarded: RequestOptions = {}): Promise<CallToolResult> {
    if (this.allowed && !this.allowed.has(name)) {
      throw new ToolsError('forbidden', `tool "${name}" of server "${this.name}" is not in its allow-list (tools: ${[...this.allowed].join(', ')})`);
    }
    const client = this.session('tools');
    if (!this.toolsCache?.some((tool) => tool.name === name)) {
      // The cache may be stale (servers need not announce list changes): look once more before saying 404.
      const tools = await this.fetchAllTools(signal);
      if (!tools.some((tool) => tool.name === name)) throw new ToolsError('not_found', `server "${this.name}" has no tool "${name}"`);
    }
    let result: CallToolResult;
    try {
      result = (await this.progress.with(forwarded, (params) => client.callTool({ name, arguments: args, ...params }, undefined, this.requestOptions(signal)))) as CallToolResult;
    } catch (error) {
      if (error instanceof McpError && SDK_OUTPUT_CHECK.test(error.message)) {
        // The SDK client's own check of the result, thrown as invalid params: the server answered wrongly, not the caller.
        throw new ToolsError('upstream', `tool "${name}" of server "${this.name}" answered wrongly: ${mcpMessageOf(error)}`, { cause: error });
      }
      throw this.failureOf(error, client, `tools/call "${name}"`);
    }
    return result;
  }

  private async listPromptsNow(cursor: string | undefined, signal: AbortSignal | undefined): Promise<ListPromptsResult> {
    const client = this.session('prompts');
    return this.request('prompts/list', client, () => client.listPrompts(cursor === undefined ? {} : { cursor }, this.requestOptions(signal)));
  }

  private async getPromptNow(name: string, args: Record<string, string>, signal: AbortSignal | undefined, forwarded: RequestOptions): Promise<GetPromptResult> {
    const client = this.session('prompts');
    try {
      return await this.progress.with(forwarded, (params) => client.getPrompt({ name, arguments: args, ...params }, this.requestOptions(signal)));
    } catch (error) {
      const failure = this.failureOf(error, client, `prompts/get "${name}"`);
      if (!signal?.aborted && (failure.kind === 'upstream' || failure.kind === 'bad_request') && !(await this.hasPrompt(name))) {
        throw new ToolsError('not_found', `server "${this.name}" has no prompt "${name}"`, { cause: error });
      }
      throw failure;
    }
  }

  private async listResourcesNow(cursor: string | undefined, signal: AbortSignal | undefined): Promise<ListResourcesResult> {
    const client = this.session('resources');
    return this.request('resources/list', client, () => client.listResources(cursor === undefined ? {} : { cursor }, this.requestOptions(signal)));
  }

  private async listResourceTemplatesNow(cursor: string | undefined, signal: AbortSignal | undefined): Promise<ListResourceTemplatesResult> {
    const client = this.session('resources');
    return this.request('resources/templates/list', client, () =>
      client.listResourceTemplates(cursor === undefined ? {} : { cursor }, this.requestOptions(signal)),
    );
  }

  private async readResourceNow(uri: string, signal: AbortSignal | undefined, forwarded: RequestOptions): Promise<ReadResourceResult> {
    const client = this.session('resources');
    try {
      return await this.progress.with(forwarded, (params) => client.readResource({ uri, ...params }, this.requestOptions(signal)));
    } catch (error) {
      const failure = this.failureOf(error, client, `resources/read "${uri}"`);
      if (!signal?.aborted && (failure.kind === 'upstream' || failure.kind === 'bad_request') && !(await this.hasResource(uri))) {
        throw new ToolsError('not_found', `server "${this.name}" has no resource "${uri}"`, { cause: error });
      }
      throw failure;
    }
  }

  // ---- internals -----------------------------------------------------------------------------------------

  private requestOptions(signal?: AbortSignal) {
    return { timeout: this.config.timeouts.request, signal };
  }

  private async request<T>(what: string, client: Client, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw this.failureOf(error, client, what);
    }
  }

  /**
   * A failed request of `client` as a ToolsError. When the transport shows that the session is gone (an HTTP
   * server that restarted no longer knows it, or cannot be reached), the session is dropped and a new one started
   * now rather than at the next health ping: until then every request would fail the same way.
   */
  private failureOf(error: unknown, client: Client, what: string): ToolsError {
    const failure = sessionRejected(error)
      ? new ToolsError('unavailable', `server "${this.name}" no longer knows this session (did it restart?); reconnecting: ${(error as Error).message}`, { cause: error })
      : toolsErrorOf(error, this.name, what);
    if (failure.kind !== 'unavailable') return failure;
    if (client === this.client && this.stateValue === 'connected') {
      this.lost(`${what} failed: ${failure.message}`);
      return failure;
    }
    // The session ended under this request (the SDK's "Connection closed"): say why it ended, when that is known.
    if (this.client === undefined && this.lastError) {
      return new ToolsError('unavailable', `server "${this.name}" lost its session during ${what}: ${this.lastError}`, { cause: error });
    }
    return failure;
  }

  /** The connected client, when the server offers `capability`. */
  private session(capability: 'tools' | 'prompts' | 'resources' | 'logging'): Client {
    const client = this.client;
    if (this.stateValue !== 'connected' || !client) {
      const why = this.lastError ? `; last error: ${this.lastError}` : '';
      throw new ToolsError('unavailable', `server "${this.name}" is not connected (${this.stateValue}${why})`);
    }
    if (!client.getServerCapabilities()?.[capability]) {
      throw new ToolsError('not_implemented', `server "${this.name}" does not offer ${capability}`);
    }
    return client;
  }

  private async fetchAllTools(signal?: AbortSignal): Promise<Tool[]> {
    const client = this.session('tools');
    const tools = await collectPages((cursor) => this.request('tools/list', client, () => client.listTools(cursor === undefined ? {} : { cursor }, this.requestOptions(signal))), (page) => page.tools);
    this.toolsCache = tools;
    for (const tool of tools) this.listedToolNames.add(tool.name);
    return tools;
  }

  private async hasPrompt(name: string): Promise<boolean> {
    try {
      const client = this.session('prompts');
      const prompts = await collectPages((cursor) => this.request('prompts/list', client, () => client.listPrompts(cursor === undefined ? {} : { cursor }, this.requestOptions())), (page) => page.prompts);
      return prompts.some((prompt) => prompt.name === name);
    } catch {
      return true; // cannot tell: keep the server's own error
    }
  }

  private async hasResource(uri: string): Promise<boolean> {
    try {
      const client = this.session('resources');
      const resources = await collectPages((cursor) => this.request('resources/list', client, () => client.listResources(cursor === undefined ? {} : { cursor }, this.requestOptions())), (page) => page.resources);
      if (resources.some((resource) => resource.uri === uri)) return true;
      const templates = await collectPages(
        (cursor) => this.request('resources/templates/list', client, () => client.listResourceTemplates(cursor === undefined ? {} : { cursor }, this.requestOptions())),
        (page) => page.resourceTemplates,
      );
      return templates.some((template) => matchesTemplate(uri, template.uriTemplate));
    } catch {
      return true;
    }
  }

  private stderrLine(line: string): void {
    if (line.trim() === '') return;
    this.stderrTail.push(line);
    if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
    this.log(`[${this.name}] ${line}`);
  }

  private async connect(): Promise<void> {
    if (this.stateValue === 'stopped' || this.retiring) return;
    const generation = ++this.generation;
    this.stateValue = 'connecting';
    this.nextAttemptAt = undefined;
    this.attemptStartedAt = Date.now();
    this.stderrTail = [];
    const client = new Client(this.clientInfo, { capabilities: this.relay ? RELAYED_CLIENT_CAPABILITIES : {} });
    let transport: Transport;
    try {
      transport = createUpstreamTransport(this.config, (line) => this.stderrLine(line));
    } catch (error) {
      // Nothing may escape: connect runs unawaited, and an unhandled rejection would end the whole tool server.
      this.failed(`start failed: ${(error as Error).message}`);
      return;
    }
    client.onerror = (error) => {
      // While connecting, the failure is reported once by connect's own error.
      if (generation === this.generation && this.stateValue === 'connected') {
        this.log(`[${this.name}] MCP transport error: ${error.message}`);
        // The SDK closes the transport after this one (a message over its size limit): the session is lost now, and
        // this is why (a ping meanwhile would only find "Not connected").
        if (/ReadBuffer exceeded/.test(error.message)) this.lost(`the MCP SDK ended the session: ${error.message}`);
        // A Streamable HTTP stream broke (the server died or restarted?): the calls waiting on it would wait out
        // their timeout; a ping now tells whether the session is still there, and if not ends it (503) at once.
        if (this.config.transport === 'http') void this.checkHealth();
      }
    };
    client.onclose = () => {
      if (generation === this.generation && this.stateValue === 'connected') this.lost('the connection closed');
    };
    const current = () => generation === this.generation;
    this.progress.listen(client);
    if (this.relay) relayFrom(client, this.name, this.relay, current, () => (this.toolsCache = undefined));
    else client.setNotificationHandler(ToolListChangedNotificationSchema, () => void (current() && (this.toolsCache = undefined)));
    this.connecting = { client, transport };
    try {
      await client.connect(transport, { timeout: this.config.timeouts.startup });
    } catch (error) {
      if (this.connecting?.client === client) this.connecting = undefined;
      await client.close().catch(() => {});
      if (generation !== this.generation) return;
      const timedOut = error instanceof McpError && error.code === ErrorCode.RequestTimeout;
      const reason = timedOut
        ? `no answer to initialize within ${this.config.timeouts.startup} ms`
        : `${(error as Error).message}${this.stderrSummary()}`;
      this.failed(`start failed: ${reason}`);
      return;
    }
    if (this.connecting?.client === client) this.connecting = undefined;
    if (generation !== this.generation) {
      await client.close().catch(() => {});
      return;
    }
    this.client = client;
    this.transport = transport;
    this.stateValue = 'connected';
    this.connectedAt = Date.now();
    this.lastError = undefined;
    this.pingTimeouts = 0;
    this.log(`[${this.name}] connected${this.pid ? ` (pid ${this.pid})` : ''}`);
    this.onSession(this.name, ++this.sessions > 1);
    this.relay?.connected(this.name);
    this.endFirstAttempt();
    void this.fetchAllTools().catch(() => {});
    void this.checkHealth();
    clearInterval(this.healthTimer);
    this.healthTimer = setInterval(() => void this.checkHealth(), this.config.timeouts.healthInterval);
    this.healthTimer.unref();
  }

  /** The session ended (process exit, closed stream, failed ping): drop it and reconnect with backoff. */
  private lost(reason: string): void {
    if (this.stateValue === 'stopped') return;
    // A session that lived longer than the longest delay was healthy: start the backoff over.
    if (Date.now() - this.connectedAt >= this.config.restart.maxDelay) this.failures = 0;
    this.generation++;
    void this.dropSession();
    this.failed(`${reason}${this.stderrSummary()}`);
  }

  private failed(reason: string): void {
    this.endFirstAttempt();
    this.lastError = reason;
    this.stateValue = 'backoff';
    clearInterval(this.healthTimer);
    const now = new Date();
    this.healthValue = { ...this.healthValue, status: 'unreachable', lastChecked: now, latencyMs: undefined, detail: reason };
    this.nextAttemptAt = undefined;
    if (this.retiring) return;
    const { initialDelay, maxDelay } = this.config.restart;
    const delay = Math.min(maxDelay, initialDelay * 2 ** Math.min(this.failures, 30));
    this.failures++;
    this.log(`[${this.name}] ${reason}; retrying in ${delay} ms`);
    clearTimeout(this.retryTimer);
    this.nextAttemptAt = Date.now() + delay;
    this.retryTimer = setTimeout(() => void this.connect(), delay);
    this.retryTimer.unref();
  }

  private async dropSession(): Promise<void> {
    const client = this.client;
    const transport = this.transport;
    this.client = undefined;
    this.transport = undefined;
    this.toolsCache = undefined;
    await terminateHttpSession(transport);
    await client?.close().catch(() => {});
  }

  private async checkHealth(): Promise<void> {
    const client = this.client;
    const generation = this.generation;
    if (!client || this.stateValue !== 'connected' || this.pinging) return;
    const timeout = this.config.timeouts.healthTimeout;
    const started = performance.now();
    this.pinging = true;
    try {
      await client.ping({ timeout }).finally(() => (this.pinging = false));
    } catch (error) {
      if (generation !== this.generation) return;
      const code = error instanceof McpError ? error.code : undefined;
      if (code === ErrorCode.RequestTimeout) {
        const count = ++this.pingTimeouts;
        const limit = this.config.restart.afterPingTimeouts;
        if (limit > 0 && count >= limit) {
          // A server that answers no ping will not answer calls either (each would wait out its timeout): a hung
          // process is restarted like one that exited.
          this.lost(`no answer to ${count} pings in a row (each within ${timeout} ms): ending the session`);
          return;
        }
        const detail = `no answer to ping within ${timeout} ms`;
        this.log(`[${this.name}] ping ${count}${limit > 0 ? ` of ${limit}` : ''} in a row not answered within ${timeout} ms`);
        this.healthValue = { ...this.healthValue, status: 'timeout', lastChecked: new Date(), latencyMs: undefined, detail };
        return;
      }
      if (code === undefined || code === ErrorCode.ConnectionClosed) {
        // The transport failed (an HTTP server that went away, a closed pipe): the session is lost; start a new one.
        this.lost(`ping failed: ${(error as Error).message}`);
        return;
      }
      // An error answer is still an answer: the server is there.
    }
    if (generation !== this.generation) return;
    this.pingTimeouts = 0;
    const now = new Date();
    this.healthValue = { name: this.name, status: 'ok', lastChecked: now, lastSuccessful: now, latencyMs: performance.now() - started };
  }

  private stderrSummary(): string {
    const tail = this.stderrTail.slice(-3).join(' | ');
    return tail ? ` (stderr: ${tail})` : '';
  }
}
