/**
 * An image classification model over HTTP (issue 36): the tiny ViT through POST /predict with base64 and data URLs
 * and through POST /predict/multipart as encoderfile 0.7 sends it (a JSON part `payload`, parts `files`), with the
 * same scores both ways, sent by Node's fetch and FormData; MCP's run_encoder with image content blocks; and every bad
 * image or form refused with the status and the text that names it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sourceInferenceWorker } from '../../src/cli/installed-files.ts';
import { parseBuildConfig } from '../../src/encoder/config.ts';
import { readImageModelPackage } from '../../src/encoder/image-model-package.ts';
import { ImagePipeline, type ImageClassificationResponse } from '../../src/encoder/image-pipeline.ts';
import { createImageHttpApp } from '../../src/serve/http/image-app.ts';
import { serverInfo } from '../../src/serve/server-info.ts';
import { TINY_VIT, writeVitModelDirectory } from '../../scripts/model-generator/index.ts';
import { ErrorCode, type CallToolResult, type McpError } from '@modelcontextprotocol/sdk/types.js';
import { mcpClient } from '../helpers/served-model.ts';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv } from 'ajv';
import { InferenceClient } from '@huggingface/inference';

const MAX_IMAGE_BYTES = 200_000;
let work: string;
let pipeline: ImagePipeline;
let app: FastifyInstance;
let url: string;
let png: Buffer;
let jpeg: Buffer;

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'image-http-'));
  await writeVitModelDirectory(path.join(work, 'vit'));
  const pkg = readImageModelPackage(parseBuildConfig('encoder:\n  name: tiny-vit\n  path: vit\n  model_type: image_classification\n', { baseDir: work }));
  pipeline = await ImagePipeline.load(pkg, { workers: 1, inferenceWorker: sourceInferenceWorker(), maxRequestInputs: 4 });
  app = await createImageHttpApp(pipeline, { bodyLimitBytes: 1_000_000, serverInfo: serverInfo({ target: 't' }), maxRequestInputs: 4, maxImageBytes: MAX_IMAGE_BYTES });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  const pixels = Buffer.from(Array.from({ length: 40 * 30 * 3 }, (_, i) => (i * 37) % 256));
  png = await sharp(pixels, { raw: { width: 40, height: 30, channels: 3 } }).png().toBuffer();
  jpeg = await sharp(pixels.reverse(), { raw: { width: 30, height: 40, channels: 3 } }).jpeg().toBuffer();
}, 60_000);

afterAll(async () => {
  await app?.close();
  await pipeline?.close();
  rmSync(work, { recursive: true, force: true });
});

function form(payload: string | null, files: { bytes: Uint8Array; name?: string; part?: string }[]): FormData {
  const body = new FormData();
  if (payload !== null) body.append('payload', payload);
  for (const { bytes, name = 'image.bin', part = 'files' } of files) body.append(part, new Blob([Uint8Array.from(bytes)]), name);
  return body;
}

async function post(pathname: string, body: FormData | unknown) {
  const init: RequestInit = body instanceof FormData ? { method: 'POST', body } : { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } };
  const response = await fetch(`${url}${pathname}`, init);
  const text = await response.text();
  return { status: response.status, text, json: () => JSON.parse(text) as ImageClassificationResponse };
}

describe('image classification over HTTP', () => {
  it('answers JSON base64, data URLs and the multipart form with the same labels and scores', async () => {
    const json = await post('/predict', { inputs: [png.toString('base64'), `data:image/jpeg;base64,${jpeg.toString('base64')}`], metadata: { id: '7' } });
    expect(json.status).toBe(200);
    const fromJson = json.json();
    expect(fromJson.model_id).toBe('tiny-vit');
    expect(fromJson.metadata).toEqual({ id: '7' });
    expect(fromJson.results.map((r) => r.labels.map((l) => l.label).sort())).toEqual([[...TINY_VIT.labels].sort(), [...TINY_VIT.labels].sort()]);

    const multipart = await post('/predict/multipart', form(JSON.stringify({ metadata: { id: '7' } }), [{ bytes: png, name: 'a.png' }, { bytes: jpeg, name: 'b.jpg' }]));
    expect(multipart.status).toBe(200);
    const fromForm = multipart.json();
    expect(fromForm.metadata).toEqual({ id: '7' });
    fromForm.results.forEach((result, i) => {
      expect(result.labels.map((l) => l.label)).toEqual(fromJson.results[i].labels.map((l) => l.label));
      result.labels.forEach((l, k) => expect(l.score).toBeCloseTo(fromJson.results[i].labels[k].score, 6));
    });
    // the two images are told apart
    expect(fromJson.results[0].labels[0].score).not.toBeCloseTo(fromJson.results[1].labels[0].score, 4);

    // encoderfile's payload: a flat object of strings is the metadata; {} is none; top_k cuts the labels
    const flat = (await post('/predict/multipart', form(JSON.stringify({ request: 'r1' }), [{ bytes: png }]))).json();
    expect(flat.metadata).toEqual({ request: 'r1' });
    const top = (await post('/predict/multipart', form(JSON.stringify({ top_k: 1 }), [{ bytes: png }]))).json();
    expect(top.results[0].labels).toEqual(fromJson.results[0].labels.slice(0, 1));
    const none = await post('/predict/multipart', form('{}', [{ bytes: jpeg }]));
    expect(none.json().results[0].labels).toHaveLength(3);

    const model = await fetch(`${url}/model`).then((r) => r.json());
    expect(model).toEqual({ model_id: 'tiny-vit', model_type: 'image_classification', id2label: { 0: 'cat', 1: 'dog', 2: 'bird' } });
  });

  it('describes itself in a valid OpenAPI 3.0 document whose schemas the real responses meet', async () => {
    const document = (await fetch(`${url}/openapi.json`).then((r) => r.json())) as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: object }> }> }>> };
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document) as unknown as Parameters<Validator["validate"]>[0]);
    expect(result.errors).toBeUndefined();
    expect(validator.version).toBe('3.0');
    expect(Object.keys(document.paths).sort()).toEqual(['/', '/health', '/invocations', '/livez', '/mcp', '/model', '/openapi.json', '/ping', '/predict', '/predict/multipart']);
    const ajv = new Ajv({ strict: false });
    const responseSchema = document.paths['/predict'].post.responses['200'].content!['application/json'].schema;
    const answered = await post('/predict', { inputs: [png.toString('base64')], top_k: 2, metadata: { a: 'b' } });
    expect(ajv.validate(responseSchema, answered.json()), JSON.stringify(ajv.errors)).toBe(true);
    // and it is not a schema anything meets
    expect(ajv.validate(responseSchema, { results: [{ labels: [{ label: 'cat' }] }], model_id: 'm' })).toBe(false);
    const modelSchema = document.paths['/model'].get.responses['200'].content!['application/json'].schema;
    expect(ajv.validate(modelSchema, await fetch(`${url}/model`).then((r) => r.json()))).toBe(true);
  });

  it('serves run_encoder over MCP, taking image content blocks, to the MCP SDK client, with the scores of /predict', async () => {
    const client = await mcpClient(url);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(['run_encoder']);
      const blocks = [
        { type: 'image', data: png.toString('base64'), mimeType: 'image/png' },
        { type: 'image', data: jpeg.toString('base64'), mimeType: 'image/jpeg' },
      ];
      const result = (await client.callTool({ name: 'run_encoder', arguments: { images: blocks, top_k: 2 } })) as CallToolResult;
      const viaHttp = (await post('/predict', { inputs: [png.toString('base64'), jpeg.toString('base64')], top_k: 2 })).json();
      expect(result.structuredContent).toEqual(JSON.parse(JSON.stringify(viaHttp)));
      const refused = await client.callTool({ name: 'run_encoder', arguments: { images: [blocks[0], { type: 'image', data: Buffer.from('no image').toString('base64') }] } }).then(
        () => null,
        (error: McpError) => error,
      );
      expect(refused?.code).toBe(ErrorCode.InvalidRequest);
      expect(refused?.message).toContain('Invalid input: images[1]: not a PNG, JPEG, WebP or GIF image');
      const text = await client.callTool({ name: 'run_encoder', arguments: { images: [{ type: 'text', text: 'a cat' }] } }).then(
        () => null,
        (error: McpError) => error,
      );
      expect(text?.message).toContain('images[0] must be an image content block');
    } finally {
      await client.close();
    }
  });

  it('refuses bad images with a 422 naming the input, and bad forms with 400, 413, 415 or 422', async () => {
    const bomb = Buffer.from(png);
    bomb.writeUInt32BE(60_000, 16);
    bomb.writeUInt32BE(60_000, 20);
    const cases: [FormData | unknown, string, number, RegExp][] = [
      [form('{}', [{ bytes: png }, { bytes: jpeg.subarray(0, jpeg.length - 100) }]), '/predict/multipart', 422, /^Invalid input: files\[1\]: the JPEG data is corrupt or truncated/],
      [form('{}', [{ bytes: new Uint8Array(0) }]), '/predict/multipart', 422, /^Invalid input: files\[0\]: the image is empty \(0 bytes\)$/],
      [form('{}', [{ bytes: png }, { bytes: Buffer.from('%PDF-1.4 not an image') }]), '/predict/multipart', 422, /^Invalid input: files\[1\]: not a PNG, JPEG, WebP or GIF image$/],
      [form('{}', [{ bytes: bomb }]), '/predict/multipart', 422, /^Invalid input: files\[0\]: the PNG image is 60000×60000 \(3600000000 pixels\), more than the limit of 40000000 pixels$/],
      [form('{}', [{ bytes: Buffer.alloc(MAX_IMAGE_BYTES + 1, 1) }]), '/predict/multipart', 422, /^Invalid input: files: an image is more than the limit of 200000 bytes$/],
      [form(null, [{ bytes: png }]), '/predict/multipart', 422, /^Invalid input: missing required multipart field "payload"/],
      [form('{not json', [{ bytes: png }]), '/predict/multipart', 422, /^Invalid input: the "payload" part is not valid JSON: /],
      [form('{"top_k": 0}', [{ bytes: png }]), '/predict/multipart', 422, /^Invalid input: top_k must be an integer of at least 1, got 0$/],
      [form('{}', []), '/predict/multipart', 422, /^Invalid input: no images: send each image as a file part named "files"$/],
      [form('{}', Array.from({ length: 5 }, () => ({ bytes: png }))), '/predict/multipart', 422, /more than the limit of 4 images per request/],
      [{ inputs: [png.toString('base64')] }, '/predict/multipart', 415, /^Bad Request: the multipart\/form-data body could not be read/],
      [{ inputs: [png.toString('base64'), Buffer.from('GIF89a').toString('base64')] }, '/predict', 422, /^Invalid input: inputs\[1\]: /],
      [{ inputs: ['not base64!'] }, '/predict', 422, /^Invalid input: inputs\[0\]: not base64/],
      [{ inputs: Array.from({ length: 5 }, () => png.toString('base64')) }, '/predict', 422, /more than the limit of 4 inputs per request/],
    ];
    for (const [body, pathname, status, message] of cases) {
      const response = await post(pathname, body);
      expect({ pathname, status: response.status, text: response.text }).toMatchObject({ status });
      expect(response.text).toMatch(message);
    }
    // a form cut short: the parser's error is a 400, not a 500
    const truncated = await fetch(`${url}/predict/multipart`, {
      method: 'POST',
      headers: { 'content-type': 'multipart/form-data; boundary=xyz' },
      body: '--xyz\r\nContent-Disposition: form-data; name="payload"\r\n\r\n{}\r\n--xyz\r\nContent-Disposition: form-data; name="files"; filename="a.png"\r\n\r\nabc',
    });
    expect(truncated.status).toBe(400);
    expect(await truncated.text()).toMatch(/^Bad Request: the multipart\/form-data body could not be read/);
    // and the server goes on answering
    expect((await post('/predict/multipart', form('{}', [{ bytes: png }]))).status).toBe(200);
  });

  it('takes one image’s bytes on POST / and /invocations, as the Hugging Face client’s imageClassification sends it, with /predict’s labels', async () => {
    const { results } = (await post('/predict', { inputs: [png.toString('base64')] })).json();
    const labels = await new InferenceClient().endpoint(url).imageClassification({ data: new Blob([Uint8Array.from(png)], { type: 'image/png' }) });
    expect(labels).toEqual(results[0].labels);
    for (const [route, type, bytes] of [['/invocations', 'image/png', png], ['/', 'application/octet-stream', png], ['/', 'image/jpeg', jpeg]] as const) {
      const response = await fetch(`${url}${route}`, { method: 'POST', headers: { 'content-type': type }, body: Uint8Array.from(bytes) });
      expect(response.status, `${route} ${type}`).toBe(200);
      const answer = (await response.json()) as { label: string; score: number }[];
      expect(answer.map(({ label }) => label).sort()).toEqual(['bird', 'cat', 'dog']);
      expect(answer[0].score).toBeGreaterThanOrEqual(answer[1].score);
    }
    const raw = (body: Uint8Array | string, type: string) => fetch(`${url}/`, { method: 'POST', headers: { 'content-type': type }, body });
    const corrupt = await raw(Uint8Array.from(png.subarray(0, 40)), 'image/png');
    expect(corrupt.status).toBe(422);
    expect(await corrupt.text()).toContain('image[0]');
    const json = await raw(JSON.stringify({ inputs: [png.toString('base64')] }), 'application/json');
    expect(json.status).toBe(415);
    expect(await json.text()).toContain("one image's bytes");
    expect((await raw(new Uint8Array(MAX_IMAGE_BYTES + 1), 'image/png')).status).toBe(413);
    expect((await raw('x', 'text/plain')).status).toBe(415);
  });
});
