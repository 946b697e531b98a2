import type { Command } from 'commander';
import { ConfigError } from '../encoder/errors.ts';
import type { GatewayConfig } from '../gateway/index.ts';
import { parseNonNegativeNumber, parsePort, parsePositiveInteger, parsePositiveNumber } from './arguments.ts';
import { RUNTIME_VERSION, type CliContext, type CliIo } from './program.ts';
import { waitForStopSignal } from './stop-signal.ts';

interface ServeOptions {
  config?: string;
  host?: string;
  port?: number;
  databaseUrl?: string;
  masterKey?: string;
  requestTimeoutSeconds?: number;
  headersTimeoutSeconds?: number;
  maxConnections?: number;
  maxConnectionsPerClient?: number;
  shutdownDelaySeconds?: number;
}

/**
 * The gateway (Hub and every vendor SDK, pg, node:sqlite) loads only when a gateway command runs: the same
 * executable serves models, whose start-up must not pay for it.
 */
const loadGateway = () => import('../gateway/index.ts');

/** Configuration problems leave as ConfigError: the program prints them and exits with 2. */
async function load(options: ServeOptions, requireMasterKey: boolean): Promise<GatewayConfig> {
  const { GatewayConfigError, loadGatewayConfig } = await loadGateway();
  try {
    return loadGatewayConfig(options, process.env, { requireMasterKey });
  } catch (error) {
    if (error instanceof GatewayConfigError) throw new ConfigError(error.message);
    throw error;
  }
}

/** `gateway serve|keygen|migrate`: the LLM gateway of spec 1. */
export function registerGatewayCommand(program: Command, io: CliIo, context: Pick<CliContext, 'dashboardFiles' | 'sqliteReader'>): void {
  const gateway = program.command('gateway').description('LLM gateway: master key, virtual keys, users, usage and budgets in front of model providers (deprecated)');

  gateway
    .command('serve')
    .description('Serve the gateway until SIGTERM or SIGINT')
    .option('-c, --config <file>', 'gateway configuration (YAML; ${ENV} is substituted)')
    .option('--host <host>', 'address to listen on (default 0.0.0.0)')
    .option('--port <port>', 'port (default 8000)', parsePort)
    .option('--database-url <url>', 'sqlite:<file> (default sqlite:gateway.db) or postgres://user:password@host:port/database')
    .option('--master-key <key>', 'master key (default: GATEWAY_MASTER_KEY, then master_key in the configuration)')
    .option('--request-timeout-seconds <seconds>', 'a request, headers and body, must arrive within this (default 60)', parsePositiveNumber)
    .option('--headers-timeout-seconds <seconds>', 'request headers must arrive within this (default 10)', parsePositiveNumber)
    .option('--max-connections <n>', 'open client connections at most (default: what the open-file limit allows, at most 10000)', parsePositiveInteger)
    .option(
      '--shutdown-delay-seconds <seconds>',
      'after SIGTERM/SIGINT: /health/readiness answers 503 at once and requests are still accepted this long, then in-flight ones finish (default 0)',
      parseNonNegativeNumber,
    )
    .option('--max-connections-per-client <n>', 'open connections of one client address at most (default: half of --max-connections)', parsePositiveInteger)
    .action(async (options: ServeOptions) => {
      const { GatewayConfigError, redactUrl, startGateway } = await loadGateway();
      const config = await load(options, true);
      for (const warning of config.warnings) io.stderr(`warning: ${warning}\n`);
      let running;
      try {
        running = await startGateway(config, {
          version: RUNTIME_VERSION,
          logger: { level: config.logLevel },
          dashboard: await context.dashboardFiles(),
          sqliteReader: context.sqliteReader(),
          shutdownDelayMs: (options.shutdownDelaySeconds ?? 0) * 1000,
        });
      } catch (error) {
        if (error instanceof GatewayConfigError) throw new ConfigError(error.message);
        const e = error as { code?: string; message: string };
        if (e.code === 'EADDRINUSE' || e.code === 'EACCES' || e.code === 'ECONNREFUSED' || e.code === '28P01' || e.code === '3D000') {
          throw new ConfigError(`cannot start the gateway (${redactUrl(config.databaseUrl)}): ${e.message}`);
        }
        throw error;
      }
      io.stderr(
        `gateway listening on ${running.url} (database ${running.store.dialect}: ${redactUrl(config.databaseUrl)}; providers: ${Object.keys(config.providers).join(', ') || 'none configured'})\n` +
          `  dashboard: ${running.url}/dashboard/ (sign in with the master key)\n` +
          '  note: this gateway is deprecated and scheduled for removal on 2026-05-18; see docs/gateway.md\n',
      );
      const signal = await waitForStopSignal();
      io.stderr(`${signal}: stopping; finishing requests in flight\n`);
      await running.close();
      io.stderr('stopped\n');
    });

  gateway
    .command('keygen')
    .description('Print a new master key: 32 random bytes from a secure generator, URL-safe base64')
    .action(async () => {
      const { generateMasterKey } = await loadGateway();
      io.stdout(`${generateMasterKey()}\n`);
    });

  gateway
    .command('migrate')
    .description('Apply the database migrations the database lacks (serve also does this at start)')
    .option('-c, --config <file>', 'gateway configuration (for database_url)')
    .option('--database-url <url>', 'sqlite:<file> or postgres://…')
    .action(async (options: ServeOptions) => {
      const { GatewayConfigError, openStore, redactUrl } = await loadGateway();
      const config = await load(options, false);
      let store;
      try {
        store = openStore(config.databaseUrl);
      } catch (error) {
        if (error instanceof GatewayConfigError) throw new ConfigError(error.message);
        throw error;
      }
      try {
        const applied = await store.migrate();
        const version = await store.schemaVersion();
        io.stdout(
          applied.length > 0
            ? `applied migration(s) ${applied.join(', ')}; schema version ${version} (${redactUrl(config.databaseUrl)})\n`
            : `already up to date at schema version ${version} (${redactUrl(config.databaseUrl)})\n`,
        );
      } catch (error) {
        throw new ConfigError(`cannot migrate ${redactUrl(config.databaseUrl)}: ${(error as Error).message}`);
      } finally {
        await store.close();
      }
    });
}
