import { InvalidArgumentError, type Command } from 'commander';
import { ConfigError } from '../encoder/errors.ts';
import type { RunningToolServer } from '../tools/index.ts';
import { RUNTIME_VERSION, type CliContext, type CliIo } from './program.ts';
import { onStopSignals, reloadsOnSighup, waitForStopSignal } from './stop-signal.ts';
import { registerToolsConfigCommands } from './tools-config-command.ts';

interface ToolsServeOptions {
  config: string;
  addr?: { host: string; port: number };
  /** false with --no-auth */
  auth: boolean;
  secrets?: string;
  stateDir?: string;
}

/** `host:port`, `[v6]:port` or `:port` (all interfaces). */
export function parseAddr(value: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65535) throw new InvalidArgumentError(`"${value}" is not an address (host:port, [::1]:port or :port)`);
  return { host: match[1] ?? (match[2] || '0.0.0.0'), port };
}

/** `tools serve`: the /api/v1 tool server in front of the configured MCP servers, until SIGTERM or SIGINT. */
export function registerToolsCommand(program: Command, io: CliIo, context: CliContext): void {
  const tools = program.command('tools').description('Tool server: an HTTP API in front of MCP servers');
  tools
    .command('serve')
    .description('Serve /api/v1 for the MCP servers of a configuration (SIGHUP reloads it on Linux and macOS; SIGTERM or Ctrl+C stops)')
    .option('-c, --config <file>', 'tools configuration (YAML; see docs/tools.md)', 'tools.yaml')
    .option('--addr <host:port>', 'address to listen on (default: 127.0.0.1:8090, or 0.0.0.0:8090 when the configuration has auth.keys)', parseAddr)
    .option('--no-auth', 'serve without authentication on an address other machines can reach (refused otherwise)')
    .option('--secrets <file>', 'values of ${secret:NAME} (mode 0600; default: $ENCODER_TOOLS_SECRETS, else ~/.config/encoder/tools.secrets.yaml)')
    .option('--state-dir <dir>', 'where the servers\' process ids are kept for the next start (default: $ENCODER_TOOLS_STATE_DIR, else ~/.local/state/encoder)')
    .action(async (options: ToolsServeOptions) => {
      const log = (line: string) => io.stderr(`${line}\n`);
      let server: RunningToolServer | undefined;
      let stopping = false;
      let reloadWhenStarted = false;
      // Handled from the start to the end: SIGHUP's default action ends the process, which a reload request sent
      // while the server starts or drains must not do.
      const onHup = () => {
        if (stopping) {
          io.stderr('SIGHUP: stopping; configuration not reloaded\n');
          return;
        }
        if (!server) {
          reloadWhenStarted = true;
          return;
        }
        try {
          const summary = server.reload();
          io.stderr(
            `SIGHUP: configuration reloaded; added: ${summary.added.join(', ') || 'none'}; removed: ${summary.removed.join(', ') || 'none'}; ` +
              `restarted: ${summary.restarted.join(', ') || 'none'}; unchanged: ${summary.unchanged.join(', ') || 'none'}; ` +
              `allow-list changed in place: ${summary.updated.join(', ') || 'none'}\n`,
          );
        } catch (error) {
          io.stderr(`SIGHUP: configuration not reloaded, keeping the current one: ${(error as Error).message}\n`);
        }
      };
      if (reloadsOnSighup()) process.on('SIGHUP', onHup);
      // loaded only when the tool server runs: the same executable serves models, whose start-up must not pay for it
      const { startToolServer, ToolsConfigError, processGroups } = await import('../tools/index.ts');
      try {
        server = await startToolServer({
          configFile: options.config,
          ...options.addr,
          noAuth: !options.auth,
          secretsFile: options.secrets,
          stateDir: options.stateDir,
          version: RUNTIME_VERSION,
          log,
          swaggerUiFiles: context.swaggerUiFiles,
        });
      } catch (error) {
        process.off('SIGHUP', onHup);
        // A bad configuration is the user's to fix: exit code 2 like every configuration error.
        if (error instanceof ToolsConfigError) throw new ConfigError(error.message);
        const code = (error as { code?: string }).code;
        if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
          throw new ConfigError(`cannot listen on ${options.addr ? `${options.addr.host}:${options.addr.port}` : 'the default address'}: ${(error as Error).message}`);
        }
        throw error;
      }
      const stopSignal = waitForStopSignal();
      if (reloadWhenStarted) onHup();
      // The banner comes once every server has connected or failed its first start (bounded by its start-up
      // timeout), so that a client that waits for it finds the servers ready; a signal meanwhile stops at once.
      const started = await Promise.race([server.upstreams.firstAttemptsSettled().then(() => true), stopSignal.then(() => false)]);
      if (started) {
        const states = server.upstreams
          .all()
          .map((upstream) => `  ${upstream.name}: ${upstream.state === 'connected' ? 'connected' : `not connected (${upstream.lastFailure ?? upstream.state}), retrying`}`);
        io.stderr(
          `tool server on ${server.url}: ${server.config.servers.length} MCP server(s); API at /api/v1, OpenAPI at /openapi.json, docs at /docs\n` +
            (states.length ? `${states.join('\n')}\n` : ''),
        );
      }
      const signal = await stopSignal;
      stopping = true;
      io.stderr(`${signal}: stopping; closing every MCP session and child process (${signal} again: at once)\n`);
      // the servers run in process groups of their own: a second signal (its default action would end this process
      // without an 'exit' event, and a Ctrl+C no longer reaches them) ends them with SIGKILL, then this process
      const stopNow = onStopSignals((again) => {
        io.stderr(`${again} again: ending every child process now\n`);
        processGroups.killAll();
        process.exit(again === 'SIGINT' ? 130 : 143);
      });
      await server.close();
      stopNow();
      process.off('SIGHUP', onHup);
      io.stderr('stopped\n');
    });

  tools
    .command('keygen')
    .description('Print a new API key (shown once) and the entry for auth.keys in tools.yaml, which stores only its SHA-256')
    .requiredOption('--name <name>', 'the key\'s name in the configuration (and in the audit log)', parseKeyName)
    .action(async (options: { name: string }) => {
      const { generateApiKey, apiKeyDigest } = await import('../tools/index.ts');
      const key = generateApiKey();
      io.stdout(`${key}\n`);
      io.stderr(
        `The key above is shown once: give it to the client, which sends "Authorization: Bearer <key>".\n` +
          `Add this under auth.keys in tools.yaml (servers: "*" for every server, or the servers the key may use):\n\n` +
          `    ${options.name}:\n      sha256: ${apiKeyDigest(key)}\n      servers: "*"\n`,
      );
    });
  registerToolsConfigCommands(tools, io);
}

function parseKeyName(value: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(value)) {
    throw new InvalidArgumentError(`"${value}": key names use letters, digits, "_", "." and "-" and start with a letter or digit`);
  }
  return value;
}
