import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { unbracket } from '../shared/host-names.ts';
import { DURATION_PATTERN, parseDuration } from './duration.ts';
import { headerProblem } from './headers.ts';
import type { SecretLookup } from './secrets.ts';

/** A configuration that cannot be used: the message names the file, the entry and what is wrong. */
export class ToolsConfigError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ToolsConfigError';
  }
}

/** Timeouts of one server, in milliseconds. */
export interface Timeouts {
  /** Starting the process (or reaching the URL) and the MCP initialize handshake. */
  startup: number;
  /** One request to the server (list, call, read, render). */
  request: number;
  /** Time between two health pings. */
  healthInterval: number;
  /** A health ping without an answer in this time counts as `timeout`. */
  healthTimeout: number;
}

/** Reconnection after a failed start or an exit: initialDelay, doubled after each failure up to maxDelay. */
export interface RestartPolicy {
  initialDelay: number;
  maxDelay: number;
  /** Health pings not answered in a row (status `timeout`) after which the session is ended and restarted; 0: never. */
  afterPingTimeouts: number;
}

export const DEFAULT_TIMEOUTS: Timeouts = { startup: 30_000, request: 60_000, healthInterval: 10_000, healthTimeout: 5_000 };
// Three pings in a row: one or two missed pings (a GC pause, a busy machine) do not cost a server its session, and
// with the default timeouts a hung server is restarted about 25-35 s after it stopped answering.
export const DEFAULT_RESTART: RestartPolicy = { initialDelay: 1_000, maxDelay: 60_000, afterPingTimeouts: 3 };
/** The largest afterPingTimeouts: a bound, so that a typo (3000 for 3) is an error rather than "never". */
const MAX_PING_TIMEOUTS = 1000;

interface ServerCommon {
  name: string;
  /** Tools that may be listed and called; undefined: all of the server's tools. */
  tools?: string[];
  timeouts: Timeouts;
  restart: RestartPolicy;
}

export interface StdioServerConfig extends ServerCommon {
  transport: 'stdio';
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
}

export interface HttpServerConfig extends ServerCommon {
  transport: 'http';
  url: string;
  headers: Record<string, string>;
}

export type ServerConfig = StdioServerConfig | HttpServerConfig;

/** Names a key may use of one kind (tools, prompts or resource URIs): every one, or these. */
export type NameGrant = '*' | ReadonlySet<string>;

/** What a key may use of one server. */
export interface ServerGrant {
  tools: NameGrant;
  prompts: NameGrant;
  /** Resource URIs; resource templates are listed only with '*'. */
  resources: NameGrant;
}

/** One API key of `auth.keys` (docs/tools.md, "Authentication"). */
export interface ApiKeyConfig {
  name: string;
  /** SHA-256 of the key, lower-case hex: the key itself is never stored. */
  sha256: string;
  /** '*': every server, with everything on it; else the servers named, each with its grant. */
  servers: '*' | ReadonlyMap<string, ServerGrant>;
  /** Requests a minute this key may make (a bucket refilled continuously); undefined: no limit. */
  requestsPerMinute?: number;
}

/** `audit`: where the audit log goes (docs/tools.md, "Metrics and audit"). */
export interface AuditConfig {
  /** An absolute path (a relative one is resolved against the configuration file's folder), or '-' for stderr. */
  file: string;
  includeArguments: boolean;
}

export interface ToolsConfig {
  /** In the order of the file. */
  servers: ServerConfig[];
  audit?: AuditConfig;
  /** undefined: no `auth` section, every request is allowed (see startToolServer for where that is permitted). */
  auth?: { keys: ApiKeyConfig[] };
  /** `allowed_hosts`: Host names accepted beside the listen address and the loopback names (http/browser-guard.ts). */
  allowedHosts?: string[];
  /** `cors_allow_origins`: web pages (origins) that may call the API from a browser (http/browser-guard.ts). */
  corsAllowOrigins?: string[];
}

const NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.-]*$';
const duration = { type: 'string', pattern: DURATION_PATTERN };
const stringMap = { type: 'object', additionalProperties: { type: 'string' } };
const timeoutsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { startup: duration, request: duration, healthInterval: duration, healthTimeout: duration },
};
const nameGrant = { anyOf: [{ const: '*' }, { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true }] };
const apiKeySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['sha256', 'servers'],
  properties: {
    sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    servers: {
      anyOf: [
        { const: '*' },
        { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
        {
          type: 'object',
          additionalProperties: {
            anyOf: [
              { type: 'null' },
              { const: '*' },
              { type: 'object', additionalProperties: false, properties: { tools: nameGrant, prompts: nameGrant, resources: nameGrant } },
            ],
          },
        },
      ],
    },
    requests_per_minute: { type: 'integer', minimum: 1, maximum: 1_000_000 },
  },
};
const restartSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { initialDelay: duration, maxDelay: duration, afterPingTimeouts: { type: 'integer', minimum: 0, maximum: MAX_PING_TIMEOUTS } },
};

/** The JSON Schema of the configuration file (after `${ENV}` substitution). docs/tools.md describes it. */
export const TOOLS_CONFIG_SCHEMA = {
  $id: 'tools-config',
  type: 'object',
  additionalProperties: false,
  required: ['servers'],
  properties: {
    defaults: { type: 'object', additionalProperties: false, properties: { timeouts: timeoutsSchema, restart: restartSchema } },
    audit: {
      type: 'object',
      additionalProperties: false,
      required: ['file'],
      properties: { file: { type: 'string', minLength: 1 }, include_arguments: { type: 'boolean' } },
    },
    auth: {
      type: 'object',
      additionalProperties: false,
      required: ['keys'],
      properties: {
        keys: { type: 'object', minProperties: 1, propertyNames: { pattern: NAME_PATTERN }, additionalProperties: apiKeySchema },
      },
    },
    // a host name or IP address (no port), or "*": every Host (docs/tools.md, "Browsers")
    allowed_hosts: { type: 'array', uniqueItems: true, items: { type: 'string', pattern: '^(\\*|[A-Za-z0-9.-]+|\\[?[0-9A-Fa-f:.]+\\]?)$' } },
    // origins as browsers send them: scheme://host[:port], nothing else
    cors_allow_origins: { type: 'array', uniqueItems: true, items: { type: 'string', pattern: '^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\\s]+/?$' } },
    servers: {
      type: ['object', 'null'],
      propertyNames: { pattern: NAME_PATTERN },
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        properties: {
          command: { type: 'string', minLength: 1 },
          args: { type: 'array', items: { type: 'string' } },
          env: stringMap,
          cwd: { type: 'string', minLength: 1 },
          url: { type: 'string', pattern: '^https?://' },
          headers: stringMap,
          tools: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
          timeouts: timeoutsSchema,
          restart: restartSchema,
        },
        // Exactly one transport: stdio (command, args, env, cwd) or Streamable HTTP (url, headers).
        if: { required: ['url'] },
        then: { properties: { command: false, args: false, env: false, cwd: false } },
        else: { required: ['command'], properties: { headers: false } },
      },
    },
  },
} as const;

const validate = new Ajv({ allErrors: true, strict: true, strictRequired: false, verbose: true }).compile(TOOLS_CONFIG_SCHEMA);

/** Reads, substitutes and validates a configuration file; `secrets` is read only when the file uses `${secret:…}`. */
export function loadToolsConfig(file: string, env: NodeJS.ProcessEnv = process.env, secrets?: () => SecretLookup): ToolsConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ToolsConfigError(`cannot read the tools configuration ${file}: ${(error as Error).message}`, { cause: error });
  }
  return parseToolsConfig(text, file, env, secrets);
}

/** Parses configuration text; `source` names it in error messages. */
export function parseToolsConfig(text: string, source: string, env: NodeJS.ProcessEnv = process.env, secrets?: () => SecretLookup): ToolsConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new ToolsConfigError(`${source}: not valid YAML: ${(error as Error).message}`, { cause: error });
  }
  let lookup: SecretLookup | undefined;
  const secret = (name: string, where: string): string => {
    if (!secrets) throw new ToolsConfigError(`${source}: ${where || '/'}: \${secret:${name}} needs a secrets file (--secrets)`);
    lookup ??= secrets();
    const value = lookup.get(name);
    if (value === undefined) throw new ToolsConfigError(`${source}: ${where || '/'}: secret ${name} is not in ${lookup.source}`);
    return value;
  };
  const substituted = substituteEnv(raw, env, source, '', secret);
  if (!validate(substituted)) {
    const problems = describeErrors(validate.errors ?? []);
    throw new ToolsConfigError(`${source}: invalid tools configuration:\n${problems.map((line) => `  - ${line}`).join('\n')}`);
  }
  const outOfRange = [
    ...durationRangeProblems(substituted as RawConfig),
    ...urlProblems(substituted as RawConfig, raw as RawConfig),
    ...headerProblems(substituted as RawConfig, raw as RawConfig),
    ...authProblems(substituted as RawConfig),
  ];
  if (outOfRange.length > 0) {
    throw new ToolsConfigError(`${source}: invalid tools configuration:\n${outOfRange.map((line) => `  - ${line}`).join('\n')}`);
  }
  return resolve(substituted as RawConfig, source);
}

interface RawTimeouts {
  startup?: string;
  request?: string;
  healthInterval?: string;
  healthTimeout?: string;
}
interface RawRestart {
  initialDelay?: string;
  maxDelay?: string;
  afterPingTimeouts?: number;
}
interface RawServer {
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  url?: string;
  headers?: Record<string, string>;
  tools?: string[];
  timeouts?: RawTimeouts;
  restart?: RawRestart;
}
type RawNameGrant = '*' | string[];
type RawServerGrant = null | '*' | { tools?: RawNameGrant; prompts?: RawNameGrant; resources?: RawNameGrant };
interface RawApiKey {
  sha256: string;
  servers: '*' | string[] | Record<string, RawServerGrant>;
  requests_per_minute?: number;
}
interface RawConfig {
  defaults?: { timeouts?: RawTimeouts; restart?: RawRestart };
  servers: Record<string, RawServer> | null;
  auth?: { keys: Record<string, RawApiKey> };
  audit?: { file: string; include_arguments?: boolean };
  allowed_hosts?: string[];
  cors_allow_origins?: string[];
}

function resolve(raw: RawConfig, source: string): ToolsConfig {
  const timeoutsOf = (own: RawTimeouts | undefined): Timeouts => ({
    ...DEFAULT_TIMEOUTS,
    ...durations({ ...raw.defaults?.timeouts }),
    ...durations({ ...own }),
  });
  const restartOf = (own: RawRestart | undefined): RestartPolicy => ({
    ...DEFAULT_RESTART,
    ...restartValues(raw.defaults?.restart),
    ...restartValues(own),
  });
  const servers = Object.entries(raw.servers ?? {}).map(([name, entry]): ServerConfig => {
    const common = { name, tools: entry.tools, timeouts: timeoutsOf(entry.timeouts), restart: restartOf(entry.restart) };
    if (entry.url !== undefined) return { ...common, transport: 'http', url: entry.url, headers: entry.headers ?? {} };
    return { ...common, transport: 'stdio', command: entry.command!, args: entry.args ?? [], env: entry.env ?? {}, cwd: entry.cwd };
  });
  const audit = raw.audit && {
    file: raw.audit.file === '-' ? '-' : path.resolve(path.dirname(source), raw.audit.file),
    includeArguments: raw.audit.include_arguments ?? false,
  };
  const resolved: ToolsConfig = audit ? { servers, audit } : { servers };
  // in the spelling requests are compared in: lower case, no brackets; an origin as a browser sends it
  if (raw.allowed_hosts) resolved.allowedHosts = raw.allowed_hosts.map((host) => unbracket(host.toLowerCase()));
  if (raw.cors_allow_origins) resolved.corsAllowOrigins = raw.cors_allow_origins.map((origin) => new URL(origin).origin);
  if (!raw.auth) return resolved;
  const keys = Object.entries(raw.auth.keys).map(([name, key]): ApiKeyConfig => ({
    name,
    sha256: key.sha256,
    servers: serverGrantsOf(key.servers),
    ...(key.requests_per_minute === undefined ? {} : { requestsPerMinute: key.requests_per_minute }),
  }));
  return { ...resolved, auth: { keys } };
}

function serverGrantsOf(raw: RawApiKey['servers']): ApiKeyConfig['servers'] {
  if (raw === '*') return '*';
  const everything: ServerGrant = { tools: '*', prompts: '*', resources: '*' };
  if (Array.isArray(raw)) return new Map(raw.map((name) => [name, everything]));
  const nameGrant = (names: RawNameGrant | undefined): NameGrant => (names === undefined || names === '*' || names.includes('*') ? '*' : new Set(names));
  return new Map(
    Object.entries(raw).map(([name, grant]) => [
      name,
      grant === null || grant === '*' ? everything : { tools: nameGrant(grant.tools), prompts: nameGrant(grant.prompts), resources: nameGrant(grant.resources) },
    ]),
  );
}

/** Keys that name a server the file does not configure (a typo would silently grant nothing), or share a digest. */
function authProblems(raw: RawConfig): string[] {
  const problems: string[] = [];
  const configured = new Set(Object.keys(raw.servers ?? {}));
  const digests = new Map<string, string>();
  for (const [name, key] of Object.entries(raw.auth?.keys ?? {})) {
    const named = key.servers === '*' ? [] : Array.isArray(key.servers) ? key.servers : Object.keys(key.servers);
    for (const server of named) {
      if (!configured.has(server)) problems.push(`/auth/keys/${name}/servers: no server "${server}" is configured`);
    }
    const twin = digests.get(key.sha256);
    if (twin !== undefined) problems.push(`/auth/keys/${name}/sha256: the same key as "${twin}" (each key needs its own)`);
    digests.set(key.sha256, name);
  }
  return problems;
}

/** Node's timers hold at most 2^31-1 ms; a longer delay fires after 1 ms (a timeout would end every request at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Durations a timer cannot hold: under 1 ms (a ping or restart loop) or over MAX_TIMER_MS (about 596h). */
function durationRangeProblems(raw: RawConfig): string[] {
  const problems: string[] = [];
  const check = (where: string, values: Record<string, string | undefined> | undefined) => {
    for (const [key, value] of Object.entries(values ?? {})) {
      if (value === undefined) continue;
      const ms = parseDuration(value)!;
      if (ms < 1) problems.push(`${where}/${key}: "${value}" is too short (at least 1ms)`);
      else if (ms > MAX_TIMER_MS) problems.push(`${where}/${key}: "${value}" is too long (at most 596h)`);
    }
  };
  check('/defaults/timeouts', { ...raw.defaults?.timeouts });
  check('/defaults/restart', restartDurations(raw.defaults?.restart));
  for (const [name, entry] of Object.entries(raw.servers ?? {})) {
    check(`/servers/${name}/timeouts`, { ...entry.timeouts });
    check(`/servers/${name}/restart`, restartDurations(entry.restart));
  }
  return problems;
}

/**
 * URLs that pass the schema's pattern but not the URL parser (`http://exa mple.com`, `http://`), and origins in
 * cors_allow_origins that are not one (a path, a query). A URL is shown as the file writes it, before `${NAME}`
 * substitution: a token in its query must not reach an error message.
 */
function urlProblems(config: RawConfig, written: RawConfig): string[] {
  const problems = Object.entries(config.servers ?? {})
    .filter(([, entry]) => entry.url !== undefined && !URL.canParse(entry.url))
    .map(([name]) => `/servers/${name}/url: ${JSON.stringify(written.servers?.[name]?.url)} is not a valid URL`);
  (config.cors_allow_origins ?? []).forEach((origin, index) => {
    if (!URL.canParse(origin)) {
      problems.push(`/cors_allow_origins/${index}: ${JSON.stringify(written.cors_allow_origins?.[index])} is not an origin (scheme://host[:port], as a browser sends it)`);
    }
  });
  return problems;
}

/**
 * Headers no HTTP client may send (headers.ts), checked after `${NAME}` substitution: an environment variable whose
 * value holds a line break would otherwise reach the request, or an error message that quotes it.
 */
function headerProblems(config: RawConfig, written: RawConfig): string[] {
  const problems: string[] = [];
  for (const [server, entry] of Object.entries(config.servers ?? {})) {
    for (const [name, value] of Object.entries(entry.headers ?? {})) {
      const problem = headerProblem(name, value);
      if (problem === null) continue;
      const substituted = written.servers?.[server]?.headers?.[name]?.includes('${') ? ' (after ${NAME} substitution)' : '';
      problems.push(`/servers/${server}/headers: ${problem}${substituted}`);
    }
  }
  return problems;
}

/** The durations of a restart entry (afterPingTimeouts is a count). */
function restartDurations(restart: RawRestart | undefined): Record<string, string | undefined> {
  const { afterPingTimeouts: _count, ...rest } = { ...restart };
  return rest;
}

function restartValues(restart: RawRestart | undefined): Partial<RestartPolicy> {
  const count = restart?.afterPingTimeouts;
  return { ...durations(restartDurations(restart)), ...(count === undefined ? {} : { afterPingTimeouts: count }) };
}

function durations(values: Record<string, string | undefined>): Record<string, number> {
  const result: Record<string, number> = {};
  for (const [key, value] of Object.entries(values)) if (value !== undefined) result[key] = parseDuration(value)!;
  return result;
}

/**
 * Replaces `${NAME}` in every string (keys stay as written) by the environment variable NAME, and `${secret:NAME}` by
 * the secret NAME; an unset variable or secret is an error that names it and where it is used (never a value).
 * `$${` writes a literal `${`.
 */
function substituteEnv(
  value: unknown,
  env: NodeJS.ProcessEnv,
  source: string,
  where: string,
  secret: (name: string, where: string) => string,
  inside: object[] = [],
): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$(\$)?\{([^}]*)\}/g, (whole, escaped: string | undefined, name: string) => {
      if (escaped) return whole.slice(1);
      if (name.startsWith('secret:') && /^[A-Za-z_][A-Za-z0-9_]*$/.test(name.slice(7))) return secret(name.slice(7), where);
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        throw new ToolsConfigError(`${source}: ${where || '/'}: "\${${name}}" is not a valid environment variable reference`);
      }
      const replacement = env[name];
      if (replacement === undefined) {
        throw new ToolsConfigError(`${source}: ${where || '/'}: environment variable ${name} is not set`);
      }
      return replacement;
    });
  }
  if (typeof value === 'object' && value !== null && inside.includes(value)) {
    // `a: &a [*a]`: YAML aliases can make a cycle, which would recurse without end
    throw new ToolsConfigError(`${source}: ${where || '/'}: a YAML alias that contains itself`);
  }
  const path = typeof value === 'object' && value !== null ? [...inside, value] : inside;
  if (Array.isArray(value)) return value.map((item, index) => substituteEnv(item, env, source, `${where}/${index}`, secret, path));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substituteEnv(item, env, source, `${where}/${key}`, secret, path)]));
  }
  return value;
}

/** Ajv's errors as `/servers/x/url: must match pattern "^https?://"` lines, without the if/then bookkeeping. */
function describeErrors(errors: ErrorObject[]): string[] {
  const lines = new Set<string>();
  // an anyOf reports every alternative's failure at its own path: one line that names the alternatives instead
  const alternatives = new Set(errors.filter((error) => error.keyword === 'anyOf').map((error) => error.instancePath || '/'));
  for (const error of errors) {
    if (error.keyword === 'if') continue;
    const at = error.instancePath || '/';
    if (error.keyword !== 'anyOf' && alternatives.has(at)) continue;
    if (error.keyword === 'anyOf') {
      // the innermost one says what is wrong; the alternatives around it fail only because of it
      if (![...alternatives].some((other) => other.startsWith(`${at}/`))) lines.add(`${at}: ${alternativesOf(at)}`);
      continue;
    }
    if (error.keyword === 'additionalProperties') {
      lines.add(`${at}: unknown property "${(error.params as { additionalProperty: string }).additionalProperty}"`);
    } else if (error.keyword === 'false schema') {
      lines.add(`${at}: not allowed here (a server has either command, args, env, cwd for stdio or url, headers for Streamable HTTP)`);
    } else if (error.keyword === 'required' && (error.params as { missingProperty: string }).missingProperty === 'command') {
      lines.add(`${at}: a server needs "command" (stdio) or "url" (Streamable HTTP)`);
    } else if (error.keyword === 'pattern' && error.schemaPath.includes('propertyNames')) {
      lines.add(`${at}: ${at.startsWith('/auth') ? 'key' : 'server'} names use letters, digits, "_", "." and "-" and start with a letter or digit`);
    } else if (error.keyword === 'pattern' && at.endsWith('/sha256')) {
      lines.add(`${at}: must be the SHA-256 of the key in lower-case hex (64 characters; \`encoder tools keygen\` prints it)`);
    } else if (error.keyword === 'propertyNames') {
      continue;
    } else if (error.keyword === 'pattern' && at.startsWith('/allowed_hosts/')) {
      lines.add(`${at}: ${JSON.stringify(error.data)} is not a host name or IP address (no scheme, no port), nor "*"`);
    } else if (error.keyword === 'pattern' && at.startsWith('/cors_allow_origins/')) {
      lines.add(`${at}: ${JSON.stringify(error.data)} is not an origin (scheme://host[:port], no path, as a browser sends it)`);
    } else if (error.keyword === 'pattern' && (error.params as { pattern: string }).pattern === DURATION_PATTERN) {
      lines.add(`${at}: "${String(error.data)}" is not a duration (write e.g. 500ms, 5s, 1m)`);
    } else {
      lines.add(`${at}: ${error.message ?? error.keyword}`);
    }
  }
  return [...lines];
}

function alternativesOf(at: string): string {
  if (/^\/auth\/keys\/[^/]+\/servers$/.test(at)) return 'must be "*", a list of server names, or a map of server names to what the key may use there';
  if (/^\/auth\/keys\/[^/]+\/servers\/[^/]+$/.test(at)) return 'must be empty or "*" (everything on the server), or a map with tools, prompts, resources';
  return 'must be "*" or a list of names';
}
