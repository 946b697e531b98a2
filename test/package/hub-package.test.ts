/**
 * The installable Hub package (packages/hub, docs/hub.md "The package"): `npm pack` builds it (prepack) into a
 * tarball; a fresh project in a temporary folder, outside this repository, installs that tarball with npm the way a
 * user does, type-checks a consumer file with `tsc --strict` and runs it with the pinned Node against the fake
 * OpenAI server. npm resolves the package's dependencies from a loopback registry that offers what this repository's
 * lockfile installs, with the tarballs of the local npm cache (test/fakes/npm-registry.ts says why not --offline), so
 * nothing is downloaded and anything the package failed to declare, or declared but did not need, shows.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dependencyProblems } from '../../scripts/hub-package.ts';
import { FakeNpmRegistry } from '../fakes/npm-registry.ts';
import { DEFAULT_COMPLETION_TEXT, DEFAULT_STREAM_PIECES, FakeOpenAIServer } from '../fakes/openai-compatible.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

const packageDir = path.join(repoRoot, 'packages', 'hub');
const readManifest = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as { name: string; dependencies: Record<string, string> };

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program to its end (the test reads failures from the result rather than from a throw). */
function run(file: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { ...options, timeout: 180_000, maxBuffer: 64 * 2 ** 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr: error && !stderr ? error.message : stderr });
    });
  });
}

/** npm with none of the npm_config_* settings of the `npm test` that runs this, and no user configuration. */
function npm(args: string[], cwd: string, userconfig: string): Promise<Run> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)));
  return run('npm', [...args, '--userconfig', userconfig, '--no-audit', '--no-fund', '--loglevel', 'error'], { cwd, env: { ...env, NO_UPDATE_NOTIFIER: '1' } });
}

/** A TypeScript file of a project that uses the package: the asynchronous, streaming and synchronous forms, and an error. */
function consumerSource(apiBase: string): string {
  return `import { amessages, completion, Hub, MissingApiKeyError } from '@encoder-sea/hub';
import type { MessagesRequest } from '@encoder-sea/hub';

const api_base = ${JSON.stringify(apiBase)};
const request: MessagesRequest = { model: 'openai:fake-model-1', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] };

const message = await amessages({ ...request, stream: false, api_key: 'sk-test', api_base });
const block = message.content[0];
const asynchronous: string = block.type === 'text' ? block.text : 'a ' + block.type + ' block';

const hub = Hub.create('openai', { api_key: 'sk-test', api_base });
const streamed: string[] = [];
for await (const event of hub.amessages({ model: 'fake-model-1', max_tokens: 64, stream: true, messages: request.messages })) {
  if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') streamed.push(event.delta.text);
}

const synchronous: string | null = completion({ model: 'openai:fake-model-1', messages: [{ role: 'user', content: 'hi' }], api_key: 'sk-test', api_base }).choices[0].message.content;

let missingKey = '';
try {
  Hub.create('openai');
} catch (error) {
  if (error instanceof MissingApiKeyError) missingKey = error.env_var_name;
}

// Never called: the declarations must reject these (were they 'any', the unused @ts-expect-error would fail tsc).
export function misuse(): void {
  // @ts-expect-error max_tokens is a number
  void amessages({ ...request, max_tokens: 'many' });
  // @ts-expect-error no such method
  hub.send_message(request);
}

console.log(JSON.stringify({ asynchronous, streamed, synchronous, missingKey }));
`;
}

describe('packages/hub/package.json check', () => {
  const pinned = { openai: '6.49.0', zod: '4.6.7', fastify: '5.12.8' };

  it('accepts dependencies that are exactly the imported packages at the pinned versions', () => {
    expect(dependencyProblems({ openai: '6.49.0', zod: '4.6.7' }, new Set(['openai', 'zod']), pinned)).toEqual([]);
  });

  it('names an imported package that is not declared, a declared one nobody imports, and another version', () => {
    const problems = dependencyProblems({ zod: '4.6.6', fastify: '5.12.8' }, new Set(['openai', 'zod']), pinned);
    expect(problems).toEqual([
      'openai is imported by src/hub but not a dependency in packages/hub/package.json',
      'zod is 4.6.6 in packages/hub/package.json but 4.6.7 in package.json',
      'fastify is a dependency in packages/hub/package.json but src/hub does not import it',
    ]);
  });
});

describe('the Hub package, installed into a fresh project', () => {
  let work: string;
  let consumer: string;
  let registry: FakeNpmRegistry;
  let fake: FakeOpenAIServer;
  let packed: { filename: string; files: { path: string }[] };
  let install: Run;

  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), 'hub-package-'));
    const userconfig = path.join(work, 'npmrc');
    writeFileSync(userconfig, '');

    const pack = await npm(['pack', '--json', '--pack-destination', work], packageDir, userconfig);
    if (pack.code !== 0) throw new Error(`npm pack failed:\n${pack.stderr}`);
    [packed] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('[')));

    [registry, fake] = await Promise.all([FakeNpmRegistry.start(path.join(repoRoot, 'package-lock.json')), FakeOpenAIServer.start()]);
    consumer = path.join(work, 'consumer');
    mkdirSync(consumer);
    writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    writeFileSync(path.join(consumer, 'consumer.ts'), consumerSource(fake.baseURL));
    install = await npm(['install', path.join(work, packed.filename), '--registry', registry.url, '--cache', path.join(work, 'npm-cache')], consumer, userconfig);
  }, 300_000);

  afterAll(async () => {
    await Promise.all([registry?.close(), fake?.close()]);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('packs only the compiled library, its declarations and its manifest', () => {
    const files = packed.files.map((file) => file.path);
    expect(files).toContain('dist/index.js');
    expect(files).toContain('dist/index.d.ts');
    expect(files).toContain('dist/sync/worker.js');
    expect(files.filter((file) => !file.startsWith('dist/')).sort()).toEqual(['README.md', 'package.json']);
    expect(files.filter((file) => !/\.(js|d\.ts)$/.test(file) && file.startsWith('dist/'))).toEqual([]);
  });

  it('installs from the tarball with npm, without the model runtime or the app’s servers', () => {
    expect(install.code, install.stderr).toBe(0);
    expect(readManifest(path.join(consumer, 'node_modules', '@encoder-sea', 'hub', 'package.json')).name).toBe('@encoder-sea/hub');
    const installed = Object.keys(JSON.parse(readFileSync(path.join(consumer, 'node_modules', '.package-lock.json'), 'utf8')).packages);
    for (const name of Object.keys(readManifest(path.join(packageDir, 'package.json')).dependencies)) expect(installed).toContain(`node_modules/${name}`);
    for (const name of ['onnxruntime-node', '@huggingface/tokenizers', 'wasmoon', 'fastify', '@grpc/grpc-js', 'pg']) {
      expect(installed.filter((location) => location.endsWith(`node_modules/${name}`)), name).toEqual([]);
      expect(registry.requested.has(name), name).toBe(false);
    }
  });

  it('type-checks a consumer file with tsc --strict against the package’s declarations', async () => {
    expect(install.code, install.stderr).toBe(0);
    const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
    const result = await run(process.execPath, [tsc, '--strict', '--noEmit', '--module', 'nodenext', '--target', 'es2024', 'consumer.ts'], { cwd: consumer, env: { PATH: process.env.PATH } });
    expect(result.stdout + result.stderr).toBe('');
    expect(result.code).toBe(0);
  }, 180_000);

  it('runs with the pinned Node and calls the provider: a message, a stream, the synchronous form, a missing key', async () => {
    expect(install.code, install.stderr).toBe(0);
    const pinned = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { devDependencies: { node: string } }).devDependencies.node;
    expect(process.version).toBe(`v${pinned}`);
    const result = await run(process.execPath, ['consumer.ts'], { cwd: consumer, env: { PATH: process.env.PATH } });
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout.trim().split('\n').at(-1)!)).toEqual({
      asynchronous: DEFAULT_COMPLETION_TEXT,
      streamed: [...DEFAULT_STREAM_PIECES],
      synchronous: DEFAULT_COMPLETION_TEXT,
      missingKey: 'OPENAI_API_KEY',
    });
    expect(fake.requestsTo('POST /v1/chat/completions')).toHaveLength(3);
  }, 180_000);
});
