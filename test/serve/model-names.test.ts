/**
 * Model names on the field APIs (issue 30, part 3): by default any `model` is the one model served and is answered
 * under the served name (text-embeddings-inference's behaviour); `serve --served-model-name a,b` renames it (the first
 * is answered and listed, all are accepted); `--strict-model-name` refuses any other name with OpenAI's 404
 * model_not_found, on every route that takes a name. The options travel from the command line to the HTTP app:
 * one test runs `serve` from source.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/encoder/errors.ts';
import { ServedModelNames } from '../../src/serve/model-names.ts';
import { startListening, type ListeningExecutable } from '../helpers/executables.ts';
import { generateTinyCrossEncoder, generateTinyModel } from '../helpers/generated-models.ts';
import { serveInProcess, type InProcessEncoder } from '../helpers/in-process-encoder.ts';
import { runCliCaptured } from '../helpers/run-cli.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

type Json = Record<string, unknown>;

let embeddingDir: string;
let crossDir: string;
const servers: InProcessEncoder[] = [];

beforeAll(async () => {
  [embeddingDir, crossDir] = await Promise.all([generateTinyModel({ modelType: 'embedding' }), generateTinyCrossEncoder()]);
});

afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
});

async function serve(dir: string, name: string, modelType: 'sentence_embedding' | 'sequence_classification', modelNames?: { aliases?: string[]; strict?: boolean }) {
  const server = await serveInProcess(dir, name, modelType, { modelNames });
  servers.push(server);
  return server;
}

async function call(server: InProcessEncoder, method: 'GET' | 'POST', route: string, body?: unknown): Promise<{ status: number; json: Json }> {
  const response = await fetch(`${server.httpUrl}${route}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Json };
}

/** The name each embedding route answers with for `model` (404: the error's code). */
async function embeddingAnswers(server: InProcessEncoder, model: string): Promise<Record<string, unknown>> {
  const embeddings = await call(server, 'POST', '/v1/embeddings', { input: 'hello', model });
  const v2 = await call(server, 'POST', '/v2/embed', { texts: ['hello'], model, input_type: 'search_query' });
  const v1 = await call(server, 'POST', '/v1/embed', { texts: ['hello'], model });
  const retrieved = await call(server, 'GET', `/v1/models/${encodeURIComponent(model)}`);
  const answer = (response: { status: number; json: Json }, field: string) =>
    response.status === 200 ? response.json[field] ?? 'ok' : `${response.status} ${(response.json.error as { code: string }).code}`;
  return {
    '/v1/embeddings': answer(embeddings, 'model'),
    '/v2/embed': answer(v2, 'response_type') === 'embeddings_by_type' ? 'ok' : answer(v2, 'response_type'),
    '/v1/embed': answer(v1, 'response_type') === 'embeddings_floats' ? 'ok' : answer(v1, 'response_type'),
    '/v1/models/{model}': answer(retrieved, 'id'),
  };
}

describe('by default: any name is the one model served', () => {
  it('every route takes any model name and answers under the model id; /v1/models lists it once', async () => {
    const server = await serve(embeddingDir, 'm-sentences', 'sentence_embedding');
    for (const name of ['m-sentences', 'text-embedding-ada-002', 'embed-v4.0', 'BAAI/bge-small-en-v1.5']) {
      expect(await embeddingAnswers(server, name), name).toEqual({ '/v1/embeddings': 'm-sentences', '/v2/embed': 'ok', '/v1/embed': 'ok', '/v1/models/{model}': 'm-sentences' });
    }
    expect(await call(server, 'GET', '/v1/models')).toMatchObject({ status: 200, json: { object: 'list', data: [{ id: 'm-sentences', object: 'model' }] } });
  });

  it('served names: the first is answered and listed; any name is still taken', async () => {
    const server = await serve(embeddingDir, 'm-renamed', 'sentence_embedding', { aliases: ['text-embedding-3-small', 'mini'] });
    for (const name of ['text-embedding-3-small', 'mini', 'm-renamed', 'other']) {
      expect(await embeddingAnswers(server, name), name).toEqual({
        '/v1/embeddings': 'text-embedding-3-small',
        '/v2/embed': 'ok',
        '/v1/embed': 'ok',
        '/v1/models/{model}': 'text-embedding-3-small',
      });
    }
    const list = await call(server, 'GET', '/v1/models');
    expect((list.json.data as Json[]).map((model) => model.id)).toEqual(['text-embedding-3-small']);
    // the spec's own routes keep the build's model id
    expect((await call(server, 'GET', '/model')).json.model_id).toBe('m-renamed');
    expect((await call(server, 'POST', '/predict', { inputs: ['hello'] })).json.model_id).toBe('m-renamed');
  });
});

describe('--strict-model-name', () => {
  it('without served names: the model id only; another name is the 404 model_not_found on every route', async () => {
    const server = await serve(embeddingDir, 'm-strict', 'sentence_embedding', { strict: true });
    expect(await embeddingAnswers(server, 'm-strict')).toEqual({ '/v1/embeddings': 'm-strict', '/v2/embed': 'ok', '/v1/embed': 'ok', '/v1/models/{model}': 'm-strict' });
    const refused = '404 model_not_found';
    expect(await embeddingAnswers(server, 'text-embedding-ada-002')).toEqual({ '/v1/embeddings': refused, '/v2/embed': refused, '/v1/embed': refused, '/v1/models/{model}': refused });
    const response = await call(server, 'POST', '/v1/embeddings', { input: 'hello', model: 'text-embedding-ada-002' });
    expect(response.json.error).toEqual({
      message: "The model 'text-embedding-ada-002' does not exist; this server serves 'm-strict'",
      type: 'invalid_request_error',
      param: 'model',
      code: 'model_not_found',
    });
    // no model at all is still the served one
    expect((await call(server, 'POST', '/v1/embeddings', { input: 'hello' })).status).toBe(200);
    expect((await call(server, 'POST', '/v1/embeddings', { input: 'hello', model: null })).status).toBe(200);
  });

  it('with served names: exactly those (not the model id), the first answered; the 404 names them all', async () => {
    const server = await serve(embeddingDir, 'm-build-id', 'sentence_embedding', { aliases: ['text-embedding-3-small', 'mini'], strict: true });
    for (const name of ['text-embedding-3-small', 'mini']) {
      expect(await embeddingAnswers(server, name), name).toEqual({
        '/v1/embeddings': 'text-embedding-3-small',
        '/v2/embed': 'ok',
        '/v1/embed': 'ok',
        '/v1/models/{model}': 'text-embedding-3-small',
      });
    }
    const refused = '404 model_not_found';
    expect(await embeddingAnswers(server, 'm-build-id')).toEqual({ '/v1/embeddings': refused, '/v2/embed': refused, '/v1/embed': refused, '/v1/models/{model}': refused });
    const response = await call(server, 'GET', '/v1/models/m-build-id');
    expect((response.json.error as Json).message).toBe("The model 'm-build-id' does not exist; this server serves 'text-embedding-3-small' (also called 'mini')");
  });

  it('rerank, v1 and v2: the same rule', async () => {
    const server = await serve(crossDir, 'cross', 'sequence_classification', { aliases: ['rerank-v3.5'], strict: true });
    const body = { query: 'capital of france', documents: ['paris', 'the cat'] };
    for (const route of ['/v1/rerank', '/v2/rerank']) {
      const served = await call(server, 'POST', route, { ...body, model: 'rerank-v3.5' });
      expect(served.status, route).toBe(200);
      expect(served.json.model).toBe('rerank-v3.5');
      const other = await call(server, 'POST', route, { ...body, model: 'cross' });
      expect(other.status, route).toBe(404);
      expect(other.json.error).toMatchObject({ code: 'model_not_found', param: 'model', message: "The model 'cross' does not exist; this server serves 'rerank-v3.5'" });
    }
  });
});

describe('ServedModelNames', () => {
  it('refuses an empty or repeated served name, as a configuration error', () => {
    expect(() => new ServedModelNames('m', { aliases: ['a', ' '] })).toThrow(new ConfigError('served model names: name 2 is empty'));
    expect(() => new ServedModelNames('m', { aliases: ['a', 'b', 'a'] })).toThrow(new ConfigError("served model names: 'a' is given twice"));
    expect(new ServedModelNames('m', { aliases: [] })).toMatchObject({ served: 'm', names: ['m'], strict: false });
  });
});

describe('serve --served-model-name and --strict-model-name', () => {
  it.each([
    ['a,,b', 'name 2 is empty'],
    ['a, b ,a', "'a' is given twice"],
    ['', 'name 1 is empty'],
  ])('"%s" is a usage error (exit code 2) saying why', async (value, problem) => {
    const result = await runCliCaptured(['serve', '--config', 'unused.yaml', '--served-model-name', value]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`option '--served-model-name <names>' argument '${value}' is invalid. ${problem}; give names separated by commas`);
  });

  describe('from the command line to the HTTP app (serve from source)', () => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'model-names-'));
    let served: ListeningExecutable;

    beforeAll(async () => {
      const config = path.join(work, 'names.yaml');
      writeFileSync(config, `encoder:\n  name: built-name\n  path: ${embeddingDir}\n  model_type: sentence_embedding\n`);
      const args = [
        path.join(repoRoot, 'src', 'cli', 'main.ts'),
        'serve',
        '--config',
        config,
        '--http-hostname',
        '127.0.0.1',
        '--http-port',
        '0',
        '--disable-grpc',
        '--served-model-name',
        ' text-embedding-3-small , mini',
        '--strict-model-name',
      ];
      served = await startListening(process.execPath, args, { cacheDir: path.join(work, 'cache') }, /model name: .*\n/);
    }, 90_000);

    afterAll(async () => {
      await served?.stop();
      rmSync(work, { recursive: true, force: true });
    });

    it('the banner says the names; the names are answered, others refused', async () => {
      expect(served.stderr()).toContain('  model name: text-embedding-3-small (also mini); any other name gets 404\n');
      const url = /HTTP +(http:\/\/\S+)/.exec(served.stderr())![1];
      const post = (model: string) => fetch(`${url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: 'hi', model }) });
      const accepted = await post('mini');
      expect(accepted.status).toBe(200);
      expect(((await accepted.json()) as Json).model).toBe('text-embedding-3-small');
      const refused = await post('built-name');
      expect(refused.status).toBe(404);
      expect(((await refused.json()) as { error: Json }).error.code).toBe('model_not_found');
      const list = (await (await fetch(`${url}/v1/models`)).json()) as { data: Json[] };
      expect(list.data.map((model) => model.id)).toEqual(['text-embedding-3-small']);
    });
  });
});
