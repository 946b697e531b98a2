import { isDeepStrictEqual } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { closeHttp } from '../shared/close-http.ts';
import { isLoopbackHost } from '../shared/host-names.ts';
import { AuditLog } from './audit.ts';
import { ApiKeys } from './auth.ts';
import { loadToolsConfig, ToolsConfigError, type ToolsConfig } from './config.ts';
import { ChildRecords, defaultStateDir } from './child-records.ts';
import { createToolsApp } from './http/app.ts';
import type { SwaggerUiFiles } from './http/docs-page.ts';
import { McpSessions } from './http/mcp-route.ts';
import { ToolsMetrics } from './metrics.ts';
import type { ApiOperation } from './operations.ts';
import { defaultSecretsFile, loadSecrets } from './secrets.ts';
import { Upstreams, type ReloadSummary } from './upstreams.ts';

export { loadToolsConfig, parseToolsConfig, ToolsConfigError, type ToolsConfig } from './config.ts';
export { Upstreams, type ReloadSummary } from './upstreams.ts';
export { exportToolsConfig } from './config-export.ts';
export { processGroups } from './process-group.ts';
export { addServerToFile, initToolsConfigFile, listServersOfFile, removeServerFromFile, type ServerEntry, type ServerListing } from './config-file.ts';
export { createToolsApp } from './http/app.ts';
export { apiKeyDigest, generateApiKey } from './auth.ts';

/** The port of `tools serve` without --addr. */
export const DEFAULT_TOOLS_PORT = 8090;

export interface ToolServerOptions {
  configFile: string;
  /** Where to listen; default 127.0.0.1:8090 without `auth` in the configuration, 0.0.0.0:8090 with it. */
  host?: string;
  port?: number;
  /** Serve without authentication on an address other hosts can reach (refused otherwise). */
  noAuth?: boolean;
  version: string;
  /** Lines about servers starting, failing, restarting, and their stderr. */
  log?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
  /** `${secret:NAME}` values (docs/tools.md, "Secrets"); default: defaultSecretsFile, read only when used. */
  secretsFile?: string;
  /** Where the stdio servers' process ids are recorded for the next start's sweep; default: defaultStateDir. */
  stateDir?: string;
  /** Swagger UI's files for /docs (the caller knows where they are: installed package or SEA assets). */
  swaggerUiFiles: SwaggerUiFiles;
}

export interface RunningToolServer {
  url: string;
  app: FastifyInstance;
  upstreams: Upstreams;
  config: ToolsConfig;
  /** Reads the configuration file again and restarts only what changed; throws (and changes nothing) when it is invalid. */
  reload(): ReloadSummary;
  /** Stops accepting requests, then closes every MCP session and child process. */
  close(): Promise<void>;
}

/**
 * Loads the configuration, starts every MCP server in the background and listens; `upstreams.firstAttemptsSettled()`
 * tells when every server's first start attempt has ended.
 */
export async function startToolServer(options: ToolServerOptions): Promise<RunningToolServer> {
  const env = options.env ?? process.env;
  const secrets = () => loadSecrets(options.secretsFile ?? defaultSecretsFile(env));
  const config = loadToolsConfig(options.configFile, env, secrets);
  const host = options.host ?? (config.auth ? '0.0.0.0' : '127.0.0.1');
  const port = options.port ?? DEFAULT_TOOLS_PORT;
  checkExposure(config, host, port, options);
  const log = options.log ?? (() => {});
  // servers a previous run with this configuration left running (it was SIGKILLed) end before new ones start
  const children = new ChildRecords(options.stateDir ?? defaultStateDir(env), options.configFile, log);
  await children.sweep();
  children.track();
  if (!config.auth && !isLoopbackHost(host)) {
    log(`warning: --no-auth: anyone who can reach ${host}:${port} can list and call every tool, prompt and resource of every configured server, with this process's rights`);
  }
  let keys = config.auth ? new ApiKeys(config.auth.keys) : null;
  let audit = config.audit ? new AuditLog(config.audit, log) : null;
  const metrics = new ToolsMetrics();
  const observe = (operation: ApiOperation, key: string | null, status: number, ms: number) => {
    metrics.record(operation, status, ms / 1000);
    audit?.record(operation, key, status, ms);
  };
  const mcp = new McpSessions({ version: options.version, observe });
  const upstreams = Upstreams.start(config, {
    log: options.log,
    clientInfo: { name: 'encoder-tools', version: options.version },
    relay: mcp.relay,
    onSession: (server, restart) => {
      metrics.sessionStarted(server, restart);
      // a server (re)connected: its tools may be new to the clients of /mcp
      mcp.listsChanged();
    },
  });
  metrics.watch(upstreams);
  mcp.watch(upstreams);
  /** The configuration in force (a reload replaces it). */
  let current = config;
  let app: FastifyInstance;
  try {
    app = await createToolsApp(upstreams, {
      version: options.version,
      swaggerUiFiles: options.swaggerUiFiles,
      keys: () => keys,
      metrics: metrics.registry,
      observe,
      mcp,
      listenHost: host,
      browserAccess: () => current,
    });
    await app.listen({ host, port });
  } catch (error) {
    await upstreams.close();
    await audit?.close();
    children.stop();
    throw error;
  }
  const address = app.server.address();
  const listening = typeof address === 'object' && address ? address.port : port;
  const running: RunningToolServer = {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${listening}`,
    app,
    upstreams,
    get config() {
      return current;
    },
    reload() {
      const next = loadToolsConfig(options.configFile, env, secrets);
      // a reload may add keys or change them, but not open a reachable server to everyone
      checkExposure(next, host, port, options);
      current = next;
      if (!next.auth) keys = null;
      else if (keys) keys.replace(next.auth.keys);
      else keys = new ApiKeys(next.auth.keys);
      if (!isDeepStrictEqual(next.audit, audit?.config)) {
        void audit?.close();
        audit = next.audit ? new AuditLog(next.audit, log) : null;
      }
      const summary = upstreams.apply(next);
      mcp.listsChanged();
      return summary;
    },
    async close() {
      // /mcp's GET streams last as long as their sessions: end those first, then the requests in flight finish,
      // each bounded by its request timeout
      await mcp.close();
      await closeHttp(app);
      await upstreams.close();
      await audit?.close();
      children.stop();
    },
  };
  return running;
}

/**
 * Tools run commands, read files and call APIs: without `auth`, only this machine may reach them unless the
 * operator says otherwise with --no-auth. With `auth`, --no-auth contradicts the file.
 */
function checkExposure(config: ToolsConfig, host: string, port: number, options: ToolServerOptions): void {
  if (config.auth && options.noAuth) {
    throw new ToolsConfigError(`${options.configFile}: has auth.keys, and --no-auth asks for no authentication; remove one of the two`);
  }
  if (!config.auth && !options.noAuth && !isLoopbackHost(host)) {
    throw new ToolsConfigError(
      `refusing to serve ${host}:${port} without authentication: anyone who can reach it could call every tool of every ` +
        `server. Add auth.keys to ${options.configFile} (make a key with \`encoder tools keygen --name NAME\`), listen on ` +
        `127.0.0.1, or pass --no-auth to accept that`,
    );
  }
}
