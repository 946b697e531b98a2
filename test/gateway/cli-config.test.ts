import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadGatewayConfig, parseConfigText } from '../../src/gateway/config.ts';
import { MIGRATIONS } from '../../src/gateway/storage/migrations.ts';
import { redactUrl } from '../../src/gateway/storage/index.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import { postgresBackend } from './helpers/gateway.ts';

const LATEST = MIGRATIONS.at(-1)!.version;
const APPLIED = `applied migration(s) ${MIGRATIONS.map((m) => m.version).join(', ')}; schema version ${LATEST}`;
const UP_TO_DATE = `already up to date at schema version ${LATEST}`;

const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-cli-'));
const postgres = await postgresBackend();
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await postgres.close();
});

function file(name: string, text: string): string {
  const target = path.join(dir, name);
  writeFileSync(target, text);
  return target;
}

describe('encoder gateway keygen and migrate', () => {
  it('keygen prints 32 random bytes, URL-safe, different every time', async () => {
    const first = await runCliCaptured(['gateway', 'keygen']);
    const second = await runCliCaptured(['gateway', 'keygen']);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^[A-Za-z0-9_-]{43}\n$/);
    expect(Buffer.from(first.stdout.trim(), 'base64url')).toHaveLength(32);
    expect(second.stdout).not.toBe(first.stdout);
  });

  it('migrate applies the migrations once, then reports the database up to date', async () => {
    const url = `sqlite:${path.join(dir, 'migrate.db')}`;
    const first = await runCliCaptured(['gateway', 'migrate', '--database-url', url]);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toContain(APPLIED);
    const again = await runCliCaptured(['gateway', 'migrate', '--database-url', url]);
    expect(again.stdout).toContain(UP_TO_DATE);
  });

  it.skipIf(postgres.skipReason)('migrate on PostgreSQL, twice at once: the advisory lock lets one apply and the other find it done', async () => {
    const url = await postgres.newDatabaseUrl();
    const results = await Promise.all([runCliCaptured(['gateway', 'migrate', '--database-url', url]), runCliCaptured(['gateway', 'migrate', '--database-url', url])]);
    expect(results.map((r) => r.code)).toEqual([0, 0]);
    const outputs = results.map((r) => r.stdout).sort();
    expect(outputs[0]).toContain(UP_TO_DATE);
    expect(outputs[1]).toContain(APPLIED);
    expect(redactUrl('postgres://gateway:s3cret@db:5432/gw')).toBe('postgres://gateway:***@db:5432/gw');
  });

  it('migrate refuses an unsupported database URL with exit code 2', async () => {
    const result = await runCliCaptured(['gateway', 'migrate', '--database-url', 'mysql://u:secret@host/db']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('unsupported scheme');
    expect(result.stderr).not.toContain('secret');
  });
});

describe('encoder gateway serve refuses to start without a usable configuration', () => {
  it('without a master key, it says how to make one (exit code 2)', async () => {
    const saved = process.env.GATEWAY_MASTER_KEY;
    delete process.env.GATEWAY_MASTER_KEY;
    try {
      const result = await runCliCaptured(['gateway', 'serve', '--port', '0', '--database-url', 'sqlite::memory:']);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('no master key');
      expect(result.stderr).toContain('encoder gateway keygen');
    } finally {
      if (saved !== undefined) process.env.GATEWAY_MASTER_KEY = saved;
    }
  });

  it('a master key of 3 characters is refused at start (exit code 2), from the flag, the environment or the file', async () => {
    const saved = process.env.GATEWAY_MASTER_KEY;
    try {
      delete process.env.GATEWAY_MASTER_KEY;
      const flag = await runCliCaptured(['gateway', 'serve', '--port', '0', '--database-url', 'sqlite::memory:', '--master-key', 'abc']);
      const fromFile = await runCliCaptured(['gateway', 'serve', '--config', file('short-key.yaml', 'master_key: abc\ndatabase_url: "sqlite::memory:"\nport: 0\n')]);
      process.env.GATEWAY_MASTER_KEY = 'abc';
      const env = await runCliCaptured(['gateway', 'serve', '--port', '0', '--database-url', 'sqlite::memory:']);
      for (const result of [flag, fromFile, env]) {
        expect(result.code).toBe(2);
        expect(result.stderr).toContain('the master key is 3 characters long; the gateway needs at least 16');
        expect(result.stderr).toContain('encoder gateway keygen');
        expect(result.stderr).not.toContain('listening');
      }
    } finally {
      if (saved === undefined) delete process.env.GATEWAY_MASTER_KEY;
      else process.env.GATEWAY_MASTER_KEY = saved;
    }
  });

  it('an unreachable database or an unusable file is exit code 2 with the password masked', async () => {
    const saved = process.env.GATEWAY_MASTER_KEY;
    process.env.GATEWAY_MASTER_KEY = 'k'.repeat(40);
    try {
      const postgres = await runCliCaptured(['gateway', 'serve', '--port', '0', '--database-url', 'postgres://u:secretpw@127.0.0.1:1/db']);
      expect(postgres.code).toBe(2);
      expect(postgres.stderr).toContain('cannot start the gateway (postgres://u:***@127.0.0.1:1/db)');
      expect(postgres.stderr).not.toContain('secretpw');
      const sqlite = await runCliCaptured(['gateway', 'serve', '--port', '0', '--database-url', `sqlite:${path.join(dir, 'missing', 'x.db')}`]);
      expect(sqlite.code).toBe(2);
      expect(sqlite.stderr).toContain('cannot open SQLite database');
    } finally {
      if (saved === undefined) delete process.env.GATEWAY_MASTER_KEY;
      else process.env.GATEWAY_MASTER_KEY = saved;
    }
  });

  it('an unset ${VARIABLE} in the configuration is an error naming it and where it is used', async () => {
    const config = file('unset.yaml', 'master_key: ${GATEWAY_TEST_SURELY_UNSET}\n');
    const result = await runCliCaptured(['gateway', 'serve', '--config', config]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('environment variable GATEWAY_TEST_SURELY_UNSET is not set (used by master_key)');
  });

  it('a malformed configuration names the field', async () => {
    const config = file('bad.yaml', 'master_key: abc\nport: "eighty"\nproviders:\n  openai:\n    api_base: not a url\n');
    const result = await runCliCaptured(['gateway', 'serve', '--config', config]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/port: .*; providers\.openai\.api_base: /);
  });
});

describe('configuration precedence and substitution', () => {
  it('substitutes ${VAR} and ${VAR:-default} in strings, nested, without YAML injection', () => {
    const parsed = parseConfigText(
      'master_key: "${KEY}"\ndatabase_url: sqlite:${DIR:-/tmp}/gw.db\nproviders:\n  openai:\n    api_key: ${OPENAI}\n',
      'test.yaml',
      { KEY: 'k: {injected: true}', OPENAI: 'sk-1' },
    );
    expect(parsed).toEqual({ master_key: 'k: {injected: true}', database_url: 'sqlite:/tmp/gw.db', providers: { openai: { api_key: 'sk-1' } } });
  });

  it('flag over GATEWAY_MASTER_KEY over the file; a key under 32 characters is a warning, under 16 an error', () => {
    const config = file('keys.yaml', 'master_key: from-the-file-0123456789-0123456789\npricing:\n  openai:gpt-4o-mini: {input_cost_per_million: 0.15, output_cost_per_million: 0.6}\n');
    expect(loadGatewayConfig({ config }, {}).masterKey).toBe('from-the-file-0123456789-0123456789');
    expect(loadGatewayConfig({ config }, { GATEWAY_MASTER_KEY: 'from-env-0123456789-0123456789-012' }).masterKey).toBe('from-env-0123456789-0123456789-012');
    const short = loadGatewayConfig({ config, masterKey: 'sixteen-chars-ok' }, { GATEWAY_MASTER_KEY: 'x'.repeat(40) });
    expect(short.masterKey).toBe('sixteen-chars-ok');
    expect(short.warnings).toEqual([expect.stringContaining('16 characters long; at least 32 are recommended')]);
    expect(() => loadGatewayConfig({ config, masterKey: 'fifteen-chars-x' }, {})).toThrow('the master key is 15 characters long; the gateway needs at least 16');
    expect(loadGatewayConfig({ config }, {}).pricing).toEqual({ 'openai:gpt-4o-mini': { input_cost_per_million: 0.15, output_cost_per_million: 0.6 } });
    expect(loadGatewayConfig({ config }, {})).toMatchObject({ host: '0.0.0.0', port: 8000, databaseUrl: 'sqlite:gateway.db', warnings: [] });
  });

  it('front-door settings: defaults, the file, flags over the file; a headers timeout longer than the request timeout is refused', () => {
    const defaults = loadGatewayConfig({}, { GATEWAY_MASTER_KEY: 'k'.repeat(40) }).frontDoor;
    expect(defaults).toMatchObject({
      requestTimeoutSeconds: 60,
      headersTimeoutSeconds: 10,
      bodyLimitBytes: 16 * 2 ** 20,
      managementBodyLimitBytes: 64 * 2 ** 10,
      maxJsonDepth: 64,
      authThrottle: { maxFailures: 20, windowSeconds: 60 },
      trustProxy: false,
    });
    expect(defaults.maxConnections).toBeGreaterThanOrEqual(16);
    expect(defaults.maxConnections).toBeLessThanOrEqual(10_000);
    expect(defaults.maxConnectionsPerClient).toBe(Math.floor(defaults.maxConnections / 2));
    const config = file(
      'front-door.yaml',
      'master_key: from-the-file-0123456789-0123456789\nrequest_timeout_seconds: 5\nheaders_timeout_seconds: 2\nmax_connections: 300\n' +
        'body_limit_bytes: 1048576\nmanagement_body_limit_bytes: 4096\nmax_json_depth: 20\nauth_throttle: {max_failures: 3, window_seconds: 10}\ntrust_proxy: [10.0.0.0/8]\n',
    );
    expect(loadGatewayConfig({ config }, {}).frontDoor).toEqual({
      requestTimeoutSeconds: 5,
      headersTimeoutSeconds: 2,
      maxConnections: 300,
      maxConnectionsPerClient: 150,
      bodyLimitBytes: 1048576,
      managementBodyLimitBytes: 4096,
      maxJsonDepth: 20,
      authThrottle: { maxFailures: 3, windowSeconds: 10 },
      trustProxy: ['10.0.0.0/8'],
    });
    expect(loadGatewayConfig({ config, requestTimeoutSeconds: 9, maxConnections: 40, maxConnectionsPerClient: 7 }, {}).frontDoor).toMatchObject({
      requestTimeoutSeconds: 9,
      maxConnections: 40,
      maxConnectionsPerClient: 7,
    });
    const off = file('no-throttle.yaml', 'master_key: from-the-file-0123456789-0123456789\nauth_throttle: false\n');
    expect(loadGatewayConfig({ config: off }, {}).frontDoor.authThrottle).toBeNull();
    expect(() => loadGatewayConfig({ config, headersTimeoutSeconds: 6 }, {})).toThrow('headers_timeout_seconds (6) must not be longer than request_timeout_seconds (5)');
    expect(() => parseConfigText('max_json_depth: 1\n', 'shallow.yaml', {})).toThrow(/max_json_depth/);
  });

  it('pricing: a rerank model priced per thousand search units needs no token prices; a price of nothing or a typo is refused', () => {
    const parsed = parseConfigText('pricing:\n  cohere:rerank-v3.5: {search_unit_cost_per_thousand: 2}\n  voyage:rerank-2.5: {input_cost_per_million: 0.05}\n', 'rerank.yaml', {});
    expect(parsed.pricing).toEqual({ 'cohere:rerank-v3.5': { search_unit_cost_per_thousand: 2 }, 'voyage:rerank-2.5': { input_cost_per_million: 0.05 } });
    expect(() => parseConfigText('pricing:\n  cohere:rerank-v3.5: {}\n', 'empty.yaml', {})).toThrow(/pricing\.cohere:rerank-v3\.5: give input_cost_per_million, output_cost_per_million or search_unit_cost_per_thousand/);
    expect(() => parseConfigText('pricing:\n  cohere:rerank-v3.5: {search_unit_cost: 2}\n', 'typo.yaml', {})).toThrow(/search_unit_cost/);
    expect(() => parseConfigText('pricing:\n  cohere:rerank-v3.5: {search_unit_cost_per_thousand: 2000}\n', 'dear.yaml', {})).toThrow(/search_unit_cost_per_thousand/);
  });

  it('require_pricing is on and the bundled table used unless the file says otherwise; a map takes provider:model, provider:* and *', () => {
    const defaults = loadGatewayConfig({ config: file('defaults.yaml', 'master_key: from-the-file-0123456789-0123456789\n') }, {});
    expect(defaults).toMatchObject({ requirePricing: true, bundledPricing: true });
    const off = loadGatewayConfig({ config: file('off.yaml', 'master_key: from-the-file-0123456789-0123456789\nrequire_pricing: false\nbundled_pricing: false\n') }, {});
    expect(off).toMatchObject({ requirePricing: false, bundledPricing: false });
    const map = parseConfigText('require_pricing:\n  "vllm:*": false\n  "openai:ft:my-model": false\n  "*": true\n', 'map.yaml', {});
    expect(map.require_pricing).toEqual({ 'vllm:*': false, 'openai:ft:my-model': false, '*': true });
    expect(() => parseConfigText('require_pricing:\n  vllm: false\n', 'bare.yaml', {})).toThrow(/require_pricing: require_pricing is true, false, or a map from provider:model, provider:\* or \*/);
    expect(() => parseConfigText('require_pricing: "no"\n', 'text.yaml', {})).toThrow(/require_pricing/);
  });
});

it('the configuration example in docs/gateway.md is valid', () => {
  const doc = readFileSync(path.join(repoRoot, 'docs', 'gateway.md'), 'utf8');
  const example = /## Configuration file\n\n```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
  expect(example).toBeDefined();
  const env = { GATEWAY_MASTER_KEY: 'k'.repeat(43), PGPASSWORD: 'pw', OPENAI_API_KEY: 'sk-1', ANTHROPIC_API_KEY: 'sk-2' };
  const parsed = parseConfigText(example!, 'docs/gateway.md', env);
  expect(parsed).toMatchObject({ database_url: 'postgres://gateway:pw@db:5432/gateway', providers: { openai: { api_key: 'sk-1' } }, instance_lease_seconds: 30 });
});
