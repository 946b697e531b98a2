import { createServer } from 'node:net';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { installedSwaggerUiFile } from '../../src/cli/installed-files.ts';
import { ApiKeys } from '../../src/tools/auth.ts';
import { parseToolsConfig } from '../../src/tools/config.ts';
import { createToolsApp } from '../../src/tools/http/app.ts';
import { Upstreams } from '../../src/tools/upstreams.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

type Json = Record<string, unknown>;

/** The pinned Node (the one running the tests) runs every MCP server the tests start. */
export const NODE = process.execPath;
export const EVERYTHING = path.join(repoRoot, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
export const MEMORY = path.join(repoRoot, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js');
export const FIXTURES = path.join(repoRoot, 'test/tools/fixtures');
export const fixture = (name: string) => path.join(FIXTURES, name);

/** A free loopback port (for servers that take a port rather than listening on 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export interface ToolsHarness {
  app: FastifyInstance;
  upstreams: Upstreams;
  logs: string[];
  close(): Promise<void>;
}

/** Upstreams from YAML text and the HTTP app over them (not listening; tests use inject). */
export async function startHarness(yaml: string, env: NodeJS.ProcessEnv = process.env): Promise<ToolsHarness> {
  const logs: string[] = [];
  const config = parseToolsConfig(yaml, 'test.yaml', env);
  const upstreams = Upstreams.start(config, { log: (line) => logs.push(line) });
  const keys = config.auth ? new ApiKeys(config.auth.keys) : null;
  const app = await createToolsApp(upstreams, { version: '0.0.0-test', swaggerUiFiles: installedSwaggerUiFile, keys: () => keys, browserAccess: () => config });
  return {
    app,
    upstreams,
    logs,
    async close() {
      await app.close();
      await upstreams.close();
    },
  };
}

/** Waits until `check` passes (polling), for state that changes in the background. */
export async function eventually<T>(check: () => T | Promise<T>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/** Whether a process is still running (signal 0 only checks). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// ---- responses against the served OpenAPI document ---------------------------------------------------------

const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** Validates responses against the operations and schemas of one OpenAPI document. */
export class OpenApiChecker {
  readonly document: Json;
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly validators = new Map<string, ValidateFunction>();

  private constructor(document: Json) {
    this.document = document;
    this.ajv.addFormat('date-time', DATE_TIME);
    this.ajv.addFormat('uri', /^[a-z][a-z0-9+.-]*:\S+$/i);
    this.ajv.addFormat('uri-reference', /^\S*$/);
    this.ajv.addSchema({ $id: 'openapi.json', components: document.components } as Json);
  }

  /** Fetches /openapi.json from the app and checks the document itself with @seriousme/openapi-schema-validator. */
  static async of(app: FastifyInstance): Promise<OpenApiChecker> {
    const response = await app.inject('/openapi.json');
    expect(response.statusCode).toBe(200);
    const document = response.json() as Json;
    const result = await new Validator().validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    return new OpenApiChecker(document);
  }

  /** The operation's documented response for this status and content type; the body must match its schema. */
  check(method: string, template: string, response: LightMyRequestResponse): void {
    const operation = ((this.document.paths as Json)[template] as Json | undefined)?.[method.toLowerCase()] as Json | undefined;
    expect(operation, `${method} ${template} is in the document`).toBeDefined();
    const documented = (operation!.responses as Json)[String(response.statusCode)] as Json | undefined;
    expect(documented, `${method} ${template} documents status ${response.statusCode}: ${response.body}`).toBeDefined();
    const contentType = String(response.headers['content-type']).split(';')[0];
    const media = (documented!.content as Json)[contentType] as Json | undefined;
    expect(media, `${method} ${template} ${response.statusCode} documents ${contentType}`).toBeDefined();
    const key = `${method} ${template} ${response.statusCode} ${contentType}`;
    let validate = this.validators.get(key);
    if (!validate) {
      validate = this.ajv.compile(relink(media!.schema) as Json);
      this.validators.set(key, validate);
    }
    // documented headers: a required one must be there, and each that is there must match its schema
    for (const [name, header] of Object.entries((documented!.headers ?? {}) as Record<string, Json>)) {
      const value = response.headers[name.toLowerCase()];
      if (header.required) expect(value, `${key} has header ${name}`).toBeDefined();
      if (value === undefined) continue;
      const text = String(value);
      const validateHeader = this.ajv.compile(relink(header.schema) as Json);
      expect(validateHeader(/^-?\d+$/.test(text) ? Number(text) : text) ? [] : validateHeader.errors, `${key} header ${name}: ${text}`).toEqual([]);
    }
    const body = contentType.endsWith('json') ? JSON.parse(response.body) : response.body;
    const valid = validate(body);
    expect(valid ? [] : validate.errors, `${key}: ${response.body.slice(0, 500)}`).toEqual([]);
  }
}

/** `#/components/...` references made absolute to the document registered as openapi.json. */
function relink(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(relink);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [key, key === '$ref' && typeof item === 'string' && item.startsWith('#') ? `openapi.json${item}` : relink(item)]),
  );
}
