import { InvalidArgumentError, type Command } from 'commander';
import { ConfigError } from '../encoder/errors.ts';
import { headerProblem } from '../tools/headers.ts';
import type { ServerEntry, ServerListing } from '../tools/index.ts';
import type { CliIo } from './program.ts';

// `encoder tools init|add|remove|list`: arguments become a ServerEntry, src/tools/config-file.ts edits the file.

interface ConfigFileOption {
  config: string;
}

interface AddOptions extends ConfigFileOption {
  url?: string;
  header?: string[];
  env?: string[];
  cwd?: string;
  tools?: string[];
  force?: boolean;
}

const CONFIG_OPTION = ['-c, --config <file>', 'tools configuration (YAML; see docs/tools.md)', 'tools.yaml'] as const;
const RELOAD_HINT = 'a running "encoder tools serve" picks the change up on SIGHUP';

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `--tools a,b`: the allow-list. */
export function parseToolList(value: string): string[] {
  const names = value.split(',').map((name) => name.trim());
  if (names.some((name) => name === '')) throw new InvalidArgumentError(`"${value}" is not a comma-separated list of tool names`);
  return names;
}

/** Repeated `--env KEY=VALUE` as a map; the value may contain "=". */
export function parseEnvPairs(values: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const value of values) {
    const equals = value.indexOf('=');
    if (equals <= 0) throw new ConfigError(`--env "${value}": write KEY=VALUE`);
    const key = value.slice(0, equals);
    if (key in env) throw new ConfigError(`--env: ${key} is given twice`);
    env[key] = value.slice(equals + 1);
  }
  return env;
}

/**
 * Repeated `--header 'Name: value'` as a map; names are HTTP field names (RFC 9110 tokens), values hold no line
 * break or other control character (headers.ts). No error shows a value: it is often a secret.
 */
export function parseHeaders(values: string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  const seen = new Set<string>();
  values.forEach((value, index) => {
    const match = /^([^:]*):[ \t]*(.*?)[ \t]*$/s.exec(value);
    if (!match) throw new ConfigError(`--header number ${index + 1} has no colon: write 'Name: value' (a header name, a colon, the value)`);
    const problem = headerProblem(match[1], match[2]);
    if (problem !== null) throw new ConfigError(`--header: ${problem}`);
    if (seen.has(match[1].toLowerCase())) throw new ConfigError(`--header: ${match[1]} is given twice`);
    seen.add(match[1].toLowerCase());
    headers[match[1]] = match[2];
  });
  return headers;
}

/** The entry `tools add` writes, from its arguments. */
export function serverEntryOf(command: string[], options: AddOptions): ServerEntry {
  const tools = options.tools ? { tools: options.tools } : {};
  if (options.url !== undefined) {
    if (command.length > 0) throw new ConfigError(`give either --url or a command after --, not both (got --url and "${command.join(' ')}")`);
    if (options.env || options.cwd !== undefined) throw new ConfigError('--env and --cwd are for stdio servers (a command after --), not with --url');
    const headers = parseHeaders(options.header ?? []);
    return { url: options.url, ...(Object.keys(headers).length ? { headers } : {}), ...tools };
  }
  if (command.length === 0) throw new ConfigError('give the server\'s command after -- (stdio: tools add NAME -- npx -y pkg) or --url URL (Streamable HTTP)');
  if (options.header) throw new ConfigError('--header is for Streamable HTTP servers (--url), not with a command');
  const env = parseEnvPairs(options.env ?? []);
  const [program, ...args] = command;
  return {
    command: program,
    ...(args.length ? { args } : {}),
    ...(Object.keys(env).length ? { env } : {}),
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...tools,
  };
}

/** A shell word as the user would type it: quoted only when it needs to be. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** `tools list` output: a table of name, transport and command or URL. */
export function formatServerList(servers: ServerListing[]): string {
  const rows = [
    ['NAME', 'TRANSPORT', 'COMMAND / URL'],
    ...servers.map((server) => [
      server.name,
      server.transport,
      server.transport === 'http' ? server.url! : server.transport === 'stdio' ? [server.command!, ...server.args!].map(shellWord).join(' ') : '(neither command nor url)',
    ]),
  ];
  const widths = [0, 1].map((column) => Math.max(...rows.map((row) => row[column].length)));
  return rows.map((row) => `${row[0].padEnd(widths[0])}  ${row[1].padEnd(widths[1])}  ${row[2]}`.trimEnd()).join('\n') + '\n';
}

/**
 * The editing functions, loaded only when a tools command runs: through src/tools/index.ts, the tool server's split
 * bundle (runtime/split-bundles.ts), which model executables do not load at start-up.
 */
async function configFile() {
  const module = await import('../tools/index.ts');
  const { ToolsConfigError } = module;
  /** A file the user must fix, or cannot be written: exit code 2 like every configuration error. */
  const userErrors = <T>(run: () => T): T => {
    try {
      return run();
    } catch (error) {
      if (error instanceof ToolsConfigError) throw new ConfigError(error.message, { cause: error });
      throw error;
    }
  };
  return { ...module, userErrors };
}

export function registerToolsConfigCommands(tools: Command, io: CliIo): void {
  tools
    .command('init')
    .description('Write a starter configuration (comments show the format); an existing file is kept unless --force')
    .option(...CONFIG_OPTION)
    .option('-f, --force', 'replace an existing file')
    .action(async (options: ConfigFileOption & { force?: boolean }) => {
      const { initToolsConfigFile, userErrors } = await configFile();
      userErrors(() => initToolsConfigFile(options.config, { force: options.force }));
      io.stdout(`wrote ${options.config}; add servers with "encoder tools add NAME -- command args…" or "encoder tools add NAME --url URL"\n`);
    });
  tools
    .command('add')
    .description('Add an MCP server: stdio (tools add NAME -- command args…) or Streamable HTTP (tools add NAME --url URL)')
    .argument('<name>', 'server name: letters, digits, "_", "." and "-"')
    .argument('[command...]', 'stdio: the command and its arguments, after -- (so that its options are not read as ours)')
    .option('--url <url>', 'Streamable HTTP: the server\'s URL (http:// or https://)')
    .option('--header <"Name: value">', 'Streamable HTTP: a request header (repeatable); ${NAME} is read from the environment of the server', collect)
    .option('--env <KEY=VALUE>', 'stdio: an environment variable of the process (repeatable)', collect)
    .option('--cwd <dir>', 'stdio: the working directory of the process')
    .option('--tools <a,b,…>', 'only these tools are listed and callable', parseToolList)
    .option('-f, --force', 'replace a server of the same name (keeping its place in the file)')
    .option(...CONFIG_OPTION)
    .action(async (name: string, command: string[], options: AddOptions) => {
      const entry = serverEntryOf(command, options);
      const { addServerToFile, userErrors } = await configFile();
      const { replaced } = userErrors(() => addServerToFile(options.config, name, entry, { replace: options.force }));
      io.stdout(`${replaced ? 'replaced server' : 'added server'} "${name}" ${replaced ? 'in' : 'to'} ${options.config}; ${RELOAD_HINT}\n`);
    });
  tools
    .command('remove')
    .description('Remove an MCP server from the configuration')
    .argument('<name>', 'server name')
    .option(...CONFIG_OPTION)
    .action(async (name: string, options: ConfigFileOption) => {
      const { removeServerFromFile, userErrors } = await configFile();
      userErrors(() => removeServerFromFile(options.config, name));
      io.stdout(`removed server "${name}" from ${options.config}; ${RELOAD_HINT}\n`);
    });
  tools
    .command('config')
    .description('The configuration as a whole')
    .command('export')
    .description('Write a copy of the configuration that holds no secret: literal env and header values (and URLs with credentials) become ${secret:NAME} references')
    .option(...CONFIG_OPTION)
    .option('-o, --output <file>', 'write the copy here (default: standard output)')
    .action(async (options: ConfigFileOption & { output?: string }) => {
      const { exportToolsConfig, userErrors } = await configFile();
      const exported = userErrors(() => exportToolsConfig(options.config));
      if (options.output) {
        const { writeFileSync } = await import('node:fs');
        writeFileSync(options.output, exported.text);
      } else {
        io.stdout(exported.text);
      }
      const replaced = Object.entries(exported.replaced).map(([where, name]) => `  ${where} → \${secret:${name}}`);
      io.stderr(
        (replaced.length ? `replaced by references (put their values in the secrets file):\n${replaced.join('\n')}\n` : '') +
          `the copy needs secrets: ${exported.secrets.join(', ') || 'none'}; environment variables: ${exported.environment.join(', ') || 'none'}\n`,
      );
    });
  tools
    .command('list')
    .description('List the configured MCP servers: name, transport, command or URL (as written: ${NAME} is not substituted)')
    .option(...CONFIG_OPTION)
    .action(async (options: ConfigFileOption) => {
      const { listServersOfFile, userErrors } = await configFile();
      const servers = userErrors(() => listServersOfFile(options.config));
      if (servers.length === 0) io.stderr(`no servers in ${options.config}; add one with "encoder tools add"\n`);
      else io.stdout(formatServerList(servers));
    });
}
