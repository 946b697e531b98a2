/**
 * Hub as a library: `npm run build:lib` compiles src/hub to JavaScript with declarations (dist/lib), and the package
 * exports it as `encoder/hub` — Node does not strip types inside node_modules, so users import the compiled files.
 * A separate Node process imports it by the package name and calls a provider (the fake OpenAI server) with the
 * asynchronous and the synchronous form, whose worker must be found next to the compiled files.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/shared-fixtures.ts';
import { DEFAULT_COMPLETION_TEXT, FakeOpenAIServer } from '../fakes/openai-compatible.ts';

const SCRIPT = `
import { acompletion, completion, Hub, MissingApiKeyError } from 'encoder/hub';
const request = { model: 'openai:fake-model-1', messages: [{ role: 'user', content: 'hi' }], api_key: 'sk-test', api_base: process.env.FAKE_BASE };
const asynchronous = await acompletion(request);
const synchronous = completion(request);
let missingKey = null;
try { await acompletion({ ...request, api_key: undefined }); } catch (error) { missingKey = error instanceof MissingApiKeyError ? error.message : String(error); }
console.log(JSON.stringify({
  asynchronous: asynchronous.choices[0].message.content,
  synchronous: synchronous.choices[0].message.content,
  providers: Hub.get_supported_providers().length,
  missingKey,
}));
`;

describe('Hub as the package export encoder/hub', () => {
  let fake: FakeOpenAIServer;
  beforeAll(async () => {
    execFileSync(process.execPath, [path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.lib.json'], { cwd: repoRoot });
    fake = await FakeOpenAIServer.start();
  }, 120_000);
  afterAll(() => fake?.close());

  it('compiles to JavaScript with declarations', () => {
    for (const file of ['index.js', 'index.d.ts', 'sync/worker.js']) expect(existsSync(path.join(repoRoot, 'dist', 'lib', 'hub', file)), file).toBe(true);
  });

  it('is imported by name from plain JavaScript, and both forms call the provider', async () => {
    const output = await new Promise<string>((resolve, reject) => {
      execFile(
        process.execPath,
        ['--input-type=module', '--eval', SCRIPT],
        { cwd: repoRoot, env: { PATH: process.env.PATH, FAKE_BASE: fake.baseURL }, timeout: 60_000 },
        (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout)),
      );
    });
    const result = JSON.parse(output.trim().split('\n').at(-1)!);
    expect(result.asynchronous).toBe(DEFAULT_COMPLETION_TEXT);
    expect(result.synchronous).toBe(DEFAULT_COMPLETION_TEXT);
    expect(result.providers).toBeGreaterThanOrEqual(23);
    expect(result.missingKey).toContain('OPENAI_API_KEY');
    expect(fake.requests.filter((request) => request.path === '/v1/chat/completions')).toHaveLength(2);
  });
});
