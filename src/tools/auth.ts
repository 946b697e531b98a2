import { createHash, randomBytes } from 'node:crypto';
import type { ApiKeyConfig, NameGrant, ServerGrant } from './config.ts';
import { ToolsError } from './errors.ts';

/** Prefix of the keys `encoder tools keygen` makes: recognisable in a secret scanner, not required of a key. */
export const API_KEY_PREFIX = 'etk_';

/** A new API key: 32 random bytes from a secure generator, URL-safe base64, with the prefix. */
export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** What `auth.keys.<name>.sha256` holds for a key. */
export function apiKeyDigest(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** A longer Authorization header is refused unread: no key is that long, and hashing it would be work for nothing. */
export const MAX_AUTHORIZATION_LENGTH = 1024;
const BEARER = /^Bearer +([A-Za-z0-9._~+/=-]+) *$/i;
/** Query parameters that would carry a key in the URL, where logs, proxies and browser history keep it. */
const KEY_QUERY_PARAMETERS = ['key', 'api_key', 'apikey', 'access_token', 'token', 'auth', 'authorization'];

/** What one request may use: every server and name, or what its key grants. */
export interface Access {
  /** The key's name (for the audit log); null without authentication. */
  readonly keyName: string | null;
  /** Every server, configured now or later (servers: "*"): such a key may read /metrics. */
  readonly everyServer: boolean;
  allowsServer(server: string): boolean;
  allowsTool(server: string, tool: string): boolean;
  allowsPrompt(server: string, prompt: string): boolean;
  allowsResource(server: string, uri: string): boolean;
  /** Resource templates describe URIs without naming them: listed only when every resource is allowed. */
  allowsEveryResource(server: string): boolean;
}

/** No `auth` section: everything. */
export const FULL_ACCESS: Access = {
  keyName: null,
  everyServer: true,
  allowsServer: () => true,
  allowsTool: () => true,
  allowsPrompt: () => true,
  allowsResource: () => true,
  allowsEveryResource: () => true,
};

const allows = (grant: NameGrant, name: string) => grant === '*' || grant.has(name);

class KeyAccess implements Access {
  readonly keyName: string;
  readonly #servers: ApiKeyConfig['servers'];
  constructor(key: ApiKeyConfig) {
    this.keyName = key.name;
    this.#servers = key.servers;
  }
  #grant(server: string): ServerGrant | undefined {
    return this.#servers === '*' ? { tools: '*', prompts: '*', resources: '*' } : this.#servers.get(server);
  }
  get everyServer(): boolean {
    return this.#servers === '*';
  }
  allowsServer(server: string): boolean {
    return this.#grant(server) !== undefined;
  }
  allowsTool(server: string, tool: string): boolean {
    const grant = this.#grant(server);
    return grant !== undefined && allows(grant.tools, tool);
  }
  allowsPrompt(server: string, prompt: string): boolean {
    const grant = this.#grant(server);
    return grant !== undefined && allows(grant.prompts, prompt);
  }
  allowsResource(server: string, uri: string): boolean {
    const grant = this.#grant(server);
    return grant !== undefined && allows(grant.resources, uri);
  }
  allowsEveryResource(server: string): boolean {
    return this.#grant(server)?.resources === '*';
  }
}

/** A token bucket of `perMinute` requests, refilled continuously. */
class RequestBudget {
  readonly perMinute: number;
  #tokens: number;
  #at: number;
  constructor(perMinute: number, now: number) {
    this.perMinute = perMinute;
    this.#tokens = perMinute;
    this.#at = now;
  }
  /** 0 when a request may go now (and takes its token), else the milliseconds until one may. */
  take(now: number): number {
    this.#tokens = Math.min(this.perMinute, this.#tokens + ((now - this.#at) * this.perMinute) / 60_000);
    this.#at = now;
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - this.#tokens) * 60_000) / this.perMinute);
  }
}

/**
 * The configured API keys, looked up by digest. `replace` (a reload) keeps each remaining key's request budget, so a
 * reload is no way around a rate limit.
 */
export class ApiKeys {
  #byDigest = new Map<string, { key: ApiKeyConfig; access: KeyAccess }>();
  #budgets = new Map<string, RequestBudget>();
  readonly #now: () => number;

  constructor(keys: readonly ApiKeyConfig[], now: () => number = Date.now) {
    this.#now = now;
    this.replace(keys);
  }

  replace(keys: readonly ApiKeyConfig[]): void {
    this.#byDigest = new Map(keys.map((key) => [key.sha256, { key, access: new KeyAccess(key) }]));
    const budgets = new Map<string, RequestBudget>();
    for (const key of keys) {
      if (key.requestsPerMinute === undefined) continue;
      const kept = this.#budgets.get(key.name);
      budgets.set(key.name, kept?.perMinute === key.requestsPerMinute ? kept : new RequestBudget(key.requestsPerMinute, this.#now()));
    }
    this.#budgets = budgets;
  }

  /**
   * The access of the request's key, from its `Authorization: Bearer <key>` header; a ToolsError `unauthorized`
   * (missing, malformed, unknown, or a key in the query string) or `rate_limited`. Error messages never repeat
   * what the client sent.
   */
  authenticate(authorization: string | undefined, query: Record<string, unknown>): Access {
    const inQuery = KEY_QUERY_PARAMETERS.find((name) => Object.keys(query).some((given) => given.toLowerCase() === name));
    if (inQuery !== undefined) {
      throw new ToolsError('unauthorized', `API keys are accepted only in the Authorization header, never in the URL (query parameter "${inQuery}")`);
    }
    if (authorization === undefined || authorization === '') {
      throw new ToolsError('unauthorized', 'this tool server requires an API key: send "Authorization: Bearer <key>"');
    }
    const token = authorization.length <= MAX_AUTHORIZATION_LENGTH ? BEARER.exec(authorization)?.[1] : undefined;
    if (token === undefined) throw new ToolsError('unauthorized', 'malformed Authorization header: expected "Bearer <key>"');
    const found = this.#byDigest.get(apiKeyDigest(token));
    if (!found) throw new ToolsError('unauthorized', 'unknown API key');
    const wait = this.#budgets.get(found.key.name)?.take(this.#now()) ?? 0;
    if (wait > 0) {
      const error = new ToolsError('rate_limited', `key "${found.key.name}" is over its ${found.key.requestsPerMinute} requests per minute`);
      error.retryAfterMs = wait;
      throw error;
    }
    return found.access;
  }
}
