// Embedding options through the public aembedding, each provider's real SDK (or fetch client) against its vendor
// fake: `dimensions` goes out under the vendor's own field, invalid or doubled values are refused before anything is
// sent, extra options follow the library's passthrough rule, and aborting the call closes the vendor connection.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { aembedding, InvalidRequestError, UnsupportedParameterError } from '../../../src/hub/index.ts';
import { startCohereFake } from '../../fakes/cohere.ts';
import { startGeminiFake } from '../../fakes/gemini.ts';
import { startMistralFake, type MistralFake } from '../../fakes/mistral.ts';
import { FakeOpenAIServer, fakeEmbedding } from '../../fakes/openai-compatible.ts';
import { startOllamaFake } from '../../fakes/ollama.ts';
import { bodyOf, fakeVector, type VendorServer } from '../../fakes/vendor-server.ts';
import { startVoyageFake } from '../../fakes/voyage.ts';
import { failureOf } from '../helpers.ts';

let openai: FakeOpenAIServer;
let gemini: VendorServer;
let mistral: MistralFake;
let cohere: VendorServer;
let ollama: VendorServer;
let voyage: VendorServer;

beforeAll(async () => {
  [openai, gemini, mistral, cohere, ollama, voyage] = await Promise.all([
    FakeOpenAIServer.start(),
    startGeminiFake(),
    startMistralFake(),
    startCohereFake(),
    startOllamaFake(),
    startVoyageFake(),
  ]);
});
afterAll(() => Promise.all([openai.close(), gemini.close(), mistral.close(), cohere.close(), ollama.close(), voyage.close()]));
beforeEach(() => {
  openai.reset();
  for (const server of [gemini, mistral.server, cohere, ollama, voyage]) server.reset();
});

/** What a test needs of a fake: the embedding requests it received, a slow reply, and the connections it lost. */
interface Wire {
  bodies(): Record<string, unknown>[];
  slowReply(ms: number): void;
  abandoned(): number;
}

function openAIWire(): Wire {
  return {
    bodies: () => openai.requestsTo('POST /v1/embeddings').map((r) => r.body as Record<string, unknown>),
    slowReply: (ms) => openai.script('POST /v1/embeddings', { delayMs: ms, then: { json: {} } }),
    abandoned: () => openai.abandonedReplies,
  };
}

function vendorWire(server: () => VendorServer): Wire {
  return {
    bodies: () => server().requests.filter((r) => r.method === 'POST').map(bodyOf),
    slowReply: (ms) => server().enqueue({ delayMs: ms, then: { json: {} } }),
    abandoned: () => server().abandonedReplies,
  };
}

interface Case {
  provider: string;
  model: string;
  options: () => { api_key: string; api_base: string };
  wire: Wire;
  /** The value of the vendor's own output-dimension field in a request body (undefined when absent). */
  sentDimensions(body: Record<string, unknown>): unknown;
  /** The vector the fake answers for a text at a length. */
  vector(text: string, dimensions?: number): number[];
}

const CASES: Case[] = [
  {
    provider: 'openai',
    model: 'text-embedding-3-small',
    options: () => ({ api_key: 'sk-test', api_base: openai.baseURL }),
    wire: openAIWire(),
    sentDimensions: (body) => body.dimensions,
    // OpenAI's own client asks for base64 float32: the numbers come back at float32 precision
    vector: (text, dimensions) => Array.from(new Float32Array(fakeEmbedding(text, dimensions))),
  },
  {
    provider: 'vllm',
    model: 'Qwen/Qwen3-Embedding-0.6B',
    options: () => ({ api_key: 'k', api_base: openai.baseURL }),
    wire: openAIWire(),
    sentDimensions: (body) => body.dimensions,
    vector: (text, dimensions) => fakeEmbedding(text, dimensions),
  },
  {
    provider: 'gemini',
    model: 'gemini-embedding-001',
    options: () => ({ api_key: 'k', api_base: gemini.url }),
    wire: vendorWire(() => gemini),
    sentDimensions(body) {
      const values = (body.requests as { outputDimensionality?: number }[]).map((r) => r.outputDimensionality);
      expect(new Set(values).size).toBe(1); // every request of the batch asks the same
      return values[0];
    },
    vector: fakeVector,
  },
  {
    provider: 'mistral',
    model: 'codestral-embed',
    options: () => ({ api_key: 'k', api_base: mistral.server.url }),
    wire: vendorWire(() => mistral.server),
    sentDimensions: (body) => body.output_dimension,
    vector: fakeVector,
  },
  {
    provider: 'cohere',
    model: 'embed-v4.0',
    options: () => ({ api_key: 'k', api_base: cohere.url }),
    wire: vendorWire(() => cohere),
    sentDimensions: (body) => body.output_dimension,
    vector: fakeVector,
  },
  {
    provider: 'ollama',
    model: 'nomic-embed-text',
    options: () => ({ api_key: 'k', api_base: ollama.url }),
    wire: vendorWire(() => ollama),
    sentDimensions: (body) => body.dimensions,
    vector: fakeVector,
  },
  {
    provider: 'voyage',
    model: 'voyage-3.5',
    options: () => ({ api_key: 'vo-key', api_base: `${voyage.url}/v1` }),
    wire: vendorWire(() => voyage),
    sentDimensions: (body) => body.output_dimension,
    vector: fakeVector,
  },
];

const texts = ['red fox', 'blue whale'];

describe.each(CASES)('$provider embeddings', (c) => {
  const embed = (extra: Record<string, unknown> = {}) => aembedding({ provider: c.provider, model: c.model, inputs: texts, ...c.options(), ...extra });

  it('dimensions goes out under the vendor\'s own field, and the vectors have that length', async () => {
    const response = await embed({ dimensions: 6 });
    const [body] = c.wire.bodies();
    expect(c.sentDimensions(body)).toBe(6);
    expect(response.data.map((item) => item.embedding)).toEqual(texts.map((text) => c.vector(text, 6)));
  });

  it('without dimensions (or with null) no output dimension is asked for', async () => {
    await embed();
    await embed({ dimensions: null });
    const bodies = c.wire.bodies();
    expect(bodies).toHaveLength(2);
    for (const body of bodies) {
      expect(c.sentDimensions(body)).toBeUndefined();
      expect(body).not.toHaveProperty('dimensions');
    }
  });

  it.each([0, -8, 1.5, '8', true, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53])('dimensions %s is an InvalidRequestError and nothing is sent', async (dimensions) => {
    const error = await failureOf(embed({ dimensions }));
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(error).toMatchObject({ param: 'dimensions' });
    expect(c.wire.bodies()).toHaveLength(0);
  });

  it('aborting the call rejects with the reason and closes the vendor connection', async () => {
    const abandoned = c.wire.abandoned();
    c.wire.slowReply(30_000);
    const controller = new AbortController();
    const pending = failureOf(embed({ signal: controller.signal }));
    for (let i = 0; i < 400 && c.wire.bodies().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(c.wire.bodies()).toHaveLength(1);
    const reason = new Error('caller left');
    controller.abort(reason);
    expect(await pending).toBe(reason);
    for (let i = 0; i < 400 && c.wire.abandoned() === abandoned; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(c.wire.abandoned()).toBe(abandoned + 1);
  });
});

describe('dimensions together with the vendor\'s own field', () => {
  it.each([
    ['gemini', 'outputDimensionality'],
    ['mistral', 'outputDimension'],
    ['cohere', 'outputDimension'],
    ['cohere', 'output_dimension'],
    ['voyage', 'output_dimension'],
  ])('%s: dimensions and %s both given is an InvalidRequestError, nothing sent', async (provider, field) => {
    const c = CASES.find((item) => item.provider === provider)!;
    const error = await failureOf(aembedding({ provider, model: c.model, inputs: texts, ...c.options(), dimensions: 6, [field]: 6 }));
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(error).toMatchObject({ param: 'dimensions' });
    expect((error as Error).message).toContain(field);
    expect(c.wire.bodies()).toHaveLength(0);
  });

  it.each([
    ['gemini', 'outputDimensionality'],
    ['mistral', 'outputDimension'],
    ['cohere', 'outputDimension'],
    ['voyage', 'output_dimension'],
  ])('%s: the vendor\'s own field %s alone still works', async (provider, field) => {
    const c = CASES.find((item) => item.provider === provider)!;
    const response = await aembedding({ provider, model: c.model, inputs: texts, ...c.options(), [field]: 3 });
    expect(c.sentDimensions(c.wire.bodies()[0])).toBe(3);
    expect(response.data[0].embedding).toHaveLength(3);
  });
});

describe('extra options of embedding calls follow the library rule', () => {
  const call = (provider: string, extra: Record<string, unknown>) => {
    const c = CASES.find((item) => item.provider === provider)!;
    return { c, result: aembedding({ provider, model: c.model, inputs: texts, ...c.options(), ...extra }) };
  };

  it('OpenAI and the compatible services: passed into the request body as they are', async () => {
    const { c, result } = call('openai', { user: 'end-user-7', encoding_format: 'float' });
    await result;
    expect(c.wire.bodies()[0]).toMatchObject({ user: 'end-user-7', encoding_format: 'float' });
  });

  it('cohere, ollama and voyage: passed on to the vendor (whose wire names work), not dropped', async () => {
    await call('cohere', { input_type: 'search_query', user: 'end-user-7' }).result;
    expect(CASES.find((c) => c.provider === 'cohere')!.wire.bodies()[0]).toMatchObject({ input_type: 'search_query', user: 'end-user-7' });
    await call('ollama', { truncate: false, keep_alive: '1m' }).result;
    expect(CASES.find((c) => c.provider === 'ollama')!.wire.bodies()[0]).toMatchObject({ truncate: false, keep_alive: '1m' });
    await call('voyage', { input_type: 'query', truncation: false }).result;
    expect(CASES.find((c) => c.provider === 'voyage')!.wire.bodies()[0]).toMatchObject({ input_type: 'query', truncation: false });
  });

  it.each([
    ['gemini', 'user'],
    ['gemini', 'output_dimensionality'],
    ['mistral', 'user'],
    ['mistral', 'encoding_format'],
    ['mistral', 'output_dimension'],
  ])('%s: %s is not a field of the SDK (which would drop it): UnsupportedParameterError, nothing sent', async (provider, field) => {
    const { c, result } = call(provider, { [field]: 'x' });
    const error = await failureOf(result);
    expect(error).toBeInstanceOf(UnsupportedParameterError);
    expect(error).toMatchObject({ parameter_name: field });
    expect(c.wire.bodies()).toHaveLength(0);
  });

  it('gemini and mistral: their SDK fields pass (taskType, outputDtype)', async () => {
    await call('gemini', { taskType: 'RETRIEVAL_QUERY' }).result;
    expect((CASES.find((c) => c.provider === 'gemini')!.wire.bodies()[0].requests as { taskType?: string }[]).every((r) => r.taskType === 'RETRIEVAL_QUERY')).toBe(true);
    await call('mistral', { outputDtype: 'float' }).result;
    expect(CASES.find((c) => c.provider === 'mistral')!.wire.bodies()[0]).toMatchObject({ output_dtype: 'float' });
  });
});
