import type { FastifyInstance } from 'fastify';
import { closeHttp } from '../shared/close-http.ts';
import { loadToolsConfig, type ToolsConfig } from './config.ts';
import { createToolsApp } from './http/app.ts';
import type { SwaggerUiFiles } from './http/docs-page.ts';
import { Upstreams, type ReloadSummary } from './upstreams.ts';

export { loadToolsConfig, parseToolsConfig, ToolsConfigError, type ToolsConfig } from './config.ts';
export { Upstreams, type ReloadSummary } from './upstreams.ts';
export { createToolsApp } from './http/app.ts';

export interface ToolServerOptions {
  configFile: string;
  host: string;
  port: number;
  version: string;
  /** Lines about servers starting, failing, restarting, and their stderr. */
  log?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
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
  const config = loadToolsConfig(options.configFile, options.env);
  const upstreams = Upstreams.start(config, { log: options.log, clientInfo: { name: 'encoder-tools', version: options.version } });
  let app: FastifyInstance;
  try {
    app = await createToolsApp(upstreams, { version: options.version, swaggerUiFiles: options.swaggerUiFiles });
    await app.listen({ host: options.host, port: options.port });
  } catch (error) {
    await upstreams.close();
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const running: RunningToolServer = {
    url: `http://${host}:${port}`,
    app,
    upstreams,
    config,
    reload() {
      const next = loadToolsConfig(options.configFile, options.env);
      running.config = next;
      return upstreams.apply(next);
    },
    async close() {
      // calls in flight finish, each bounded by its request timeout
      await closeHttp(app);
      await upstreams.close();
    },
  };
  return running;
}
