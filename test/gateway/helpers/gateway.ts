import type { ThreadScript } from '../../../src/shared/thread-script.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { GatewayConfig } from '../../../src/gateway/config.ts';
import { defaultFrontDoor } from '../../../src/gateway/front-door-settings.ts';
import type { DashboardFiles } from '../../../src/gateway/dashboard/files.ts';
import { startGateway, type RunningGateway } from '../../../src/gateway/gateway.ts';
import type { UsageRecord } from '../../../src/gateway/storage/records.ts';
import { CHAT_USAGE, errorBody, FakeOpenAIServer, type ScriptedReply } from '../../fakes/openai-compatible.ts';
import { startPostgres, type TestPostgres } from './postgres.ts';

export const MASTER_KEY = 'test-master-key-0123456789abcdefghijklmnop';

/** The price the tests give the fake provider's model (dear, so that costs are large, round-ish numbers). */
export const TEST_PRICING = { input_cost_per_million: 1000, output_cost_per_million: 2000 };

/** What one default chat completion of the fake provider costs at TEST_PRICING, in dollars. */
export const CHAT_COST = (CHAT_USAGE.prompt_tokens * TEST_PRICING.input_cost_per_million + CHAT_USAGE.completion_tokens * TEST_PRICING.output_cost_per_million) / 1e6;

/** A provider key quoted in the fake provider's 401 message (as OpenAI quotes it): it must reach no client and no log. */
export const KEY_IN_PROVIDER_ERROR = 'sk-secret123456789';

/** The fake provider's chat route, to script its replies. */
export const PROVIDER_CHAT_ROUTE = 'POST /v1/chat/completions';

/** Provider failures as the OpenAI API answers them, to script on the fake provider's chat route. */
export const PROVIDER_FAILURES = {
  rateLimited: { status: 429, headers: { 'retry-after': '7' }, json: errorBody('Rate limit reached for requests', 'requests') },
  badRequest: { status: 400, json: errorBody("Invalid value for 'temperature'") },
  serverError: { status: 500, json: errorBody('The server had an error while processing your request', 'server_error') },
  unauthorized: { status: 401, json: errorBody(`Incorrect API key provided: ${KEY_IN_PROVIDER_ERROR}`) },
} satisfies Record<string, ScriptedReply>;

export function testConfig(databaseUrl: string, overrides: Partial<GatewayConfig> = {}): GatewayConfig {
  return {
    masterKey: MASTER_KEY,
    databaseUrl,
    host: '127.0.0.1',
    port: 0,
    providers: {},
    pricing: {},
    requirePricing: true,
    bundledPricing: true,
    models: {},
    rateLimits: null,
    reserveOutputTokens: 1024,
    upstreamTimeoutSeconds: 30,
    instanceLeaseSeconds: 30,
    corsAllowOrigins: [],
    logLevel: 'silent',
    frontDoor: defaultFrontDoor(),
    warnings: [],
    ...overrides,
  };
}

/** A database backend for a test file: SQLite files in a temporary folder, or databases on a throwaway PostgreSQL. */
export interface Backend {
  name: 'sqlite' | 'postgres';
  /** Why the backend is unavailable (the suite skips and prints this), or null. */
  skipReason: string | null;
  newDatabaseUrl(): Promise<string>;
  close(): Promise<void>;
}

export function sqliteBackend(): Backend {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-sqlite-'));
  let n = 0;
  return {
    name: 'sqlite',
    skipReason: null,
    newDatabaseUrl: async () => `sqlite:${path.join(dir, `gateway-${++n}.db`)}`,
    close: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

export async function postgresBackend(): Promise<Backend> {
  const started = await startPostgres();
  if (!started.server) {
    console.warn(`skipping the PostgreSQL gateway tests: ${started.reason}`);
    return { name: 'postgres', skipReason: started.reason, newDatabaseUrl: () => Promise.reject(new Error(started.reason)), close: async () => {} };
  }
  const server: TestPostgres = started.server;
  return { name: 'postgres', skipReason: null, newDatabaseUrl: () => server.createDatabase(), close: () => server.stop() };
}

/**
 * The backends a test file runs its `describe.each` on: SQLite, and PostgreSQL where one can be started (else its
 * tests skip); closed after the file's tests. Call at the top level of the file.
 */
export async function useBackends(): Promise<Backend[]> {
  const backends = [sqliteBackend(), await postgresBackend()];
  afterAll(async () => {
    await Promise.all(backends.map((backend) => backend.close()));
  });
  return backends;
}

/** A fake OpenAI-compatible provider for the test file, closed after its tests. Call at the top level of the file. */
export async function useFakeProvider(options: { record?: boolean } = {}): Promise<FakeOpenAIServer> {
  const fake = await FakeOpenAIServer.start(options);
  afterAll(() => fake.close());
  return fake;
}

/**
 * A gateway on a new database of `backend` for the enclosing describe block, unless the backend is skipped: `config`
 * is read when it starts (after the file's own beforeAll), `ready` gets it (make keys and clients there); it is closed
 * after the block's tests.
 */
export function useTestGateway(backend: Backend, config: () => Partial<GatewayConfig>, ready: (gateway: TestGateway) => void | Promise<void>): void {
  let gateway: TestGateway | undefined;
  beforeAll(async () => {
    if (backend.skipReason) return;
    gateway = await startTestGateway(await backend.newDatabaseUrl(), config());
    await ready(gateway);
  });
  afterAll(async () => {
    await gateway?.close();
  });
}

/** A usage row of one successful chat completion (1 + 1 tokens) as a test writes it straight to a store; `fields` change it. */
export function usageRecord(id: string, fields: Partial<UsageRecord> = {}): UsageRecord {
  return {
    id,
    request_id: id,
    created_at: Date.now(),
    user_id: null,
    key_id: null,
    endpoint: 'chat.completions',
    provider: 'openai',
    model: 'gpt',
    prompt_tokens: 1,
    completion_tokens: 1,
    search_units: 0,
    cost_nanos: 1n,
    status: 'success',
    status_code: 200,
    duration_ms: 1,
    ...fields,
  };
}

/** Polls `read` every 25 ms until it gives a value (a usage row written after the answer, say); fails after 10 s naming `what`. */
export async function eventually<T>(read: () => Promise<T | undefined> | T | undefined, what: string): Promise<T> {
  for (let attempt = 0; attempt < 400; attempt++) {
    const value = await read();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export interface TestGateway extends RunningGateway {
  /** fetch against the gateway with a bearer credential in X-Hub-Key (or none). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
  call(method: string, urlPath: string, options?: { key?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; headers: Headers; json: any }>;
}

export async function startTestGateway(
  databaseUrl: string,
  overrides: Partial<GatewayConfig> = {},
  options: { logStream?: NodeJS.WritableStream; dashboard?: DashboardFiles; sqliteReader?: ThreadScript; shutdownDelayMs?: number } = {},
): Promise<TestGateway> {
  const running = await startGateway(testConfig(databaseUrl, overrides), {
    version: '0.0.0-test',
    logger: options.logStream ? { level: 'info', stream: options.logStream } : false,
    dashboard: options.dashboard,
    sqliteReader: options.sqliteReader,
    shutdownDelayMs: options.shutdownDelayMs,
  });
  return {
    ...running,
    async call(method, urlPath, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      const key = options.key === undefined ? MASTER_KEY : options.key;
      if (key !== null) headers['x-hub-key'] = `Bearer ${key}`;
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      const response = await fetch(running.url + urlPath, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
      });
      const text = await response.text();
      let json: unknown = text;
      try {
        json = JSON.parse(text);
      } catch {
        // not JSON (metrics, SSE)
      }
      return { status: response.status, headers: response.headers, json };
    },
  };
}
