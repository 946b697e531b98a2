// npm run bench:hub — what the Hub adds per call over a bare fetch to the same server.
//
// The fake OpenAI-compatible server (test/fakes) runs in its own process. Bedrock: the Bedrock fake (Converse and
// ConverseStream with event-stream frames) runs in this process; its rows compare the Hub with the AWS SDK client
// configured as the Hub configures it (bearer key, HTTP/1.1 keep-alive), and with a bare fetch of the same body. Each round calls every variant the
// same number of times, interleaved, so drift on this shared machine hits all of them alike. Non-streaming: time to
// the parsed answer. Streaming: time to the first event (the rest of the stream is read but not timed).

import { BedrockRuntimeClient, ConverseCommand, ConverseStreamCommand } from '@aws-sdk/client-bedrock-runtime';
import OpenAI from 'openai';
import { acompletion, amessages } from '../src/hub/index.ts';
import { bedrockClientConfig } from '../src/hub/providers/bedrock/provider.ts';
import { startBedrockFake } from '../test/fakes/bedrock.ts';
import { FakeOpenAIProcess } from '../test/fakes/openai-compatible-process.ts';
import { ms, printTable } from './measure.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CALLS = Number(process.env.BENCH_CALLS ?? 300);

const fake = await FakeOpenAIProcess.start();
const base = fake.baseURL;
const key = 'sk-bench';
const chatBody = { model: 'gpt-bench', messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 16 };
const sdk = new OpenAI({ apiKey: key, baseURL: base, maxRetries: 0 });
const hubOptions = { api_key: key, api_base: base, provider: 'openai' } as const;
const messagesRequest = { ...hubOptions, model: 'gpt-bench', max_tokens: 16, messages: [{ role: 'user' as const, content: 'hi' }] };

// the AWS SDK needs a region even behind an endpoint override (it is part of what a request is signed for)
process.env.AWS_REGION ??= 'us-east-1';
const bedrockFake = await startBedrockFake();
const bedrockModel = 'anthropic.claude-3-5-haiku-20241022-v1:0';
const bedrockKey = 'ABSKbench';
const bedrockSdk = new BedrockRuntimeClient(bedrockClientConfig({ api_key: bedrockKey, api_base: bedrockFake.url }));
const converseInput = { modelId: bedrockModel, messages: [{ role: 'user' as const, content: [{ text: 'hi' }] }], inferenceConfig: { maxTokens: 16 } };
const bedrockRequest = { provider: 'bedrock', api_key: bedrockKey, api_base: bedrockFake.url, model: bedrockModel, max_tokens: 16, messages: [{ role: 'user' as const, content: 'hi' }] };

async function bareBedrockFetch(stream: boolean): Promise<void> {
  const response = await fetch(`${bedrockFake.url}/model/${encodeURIComponent(bedrockModel)}/${stream ? 'converse-stream' : 'converse'}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${bedrockKey}` },
    body: JSON.stringify({ messages: converseInput.messages, inferenceConfig: converseInput.inferenceConfig }),
  });
  if (!stream) {
    await response.json();
    return;
  }
  // first event: the first frame's bytes (its length is the frame's first 4 bytes; not decoded)
  const reader = response.body!.getReader();
  await reader.read();
  mark();
  while (!(await reader.read()).done);
}

async function bareFetch(stream: boolean): Promise<void> {
  const response = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(stream ? { ...chatBody, stream: true } : chatBody),
  });
  if (!stream) {
    await response.json();
    return;
  }
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  // first event: the first complete "data:" line
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  JSON.parse(text.slice(text.indexOf('data: ') + 6, text.indexOf('\n\n')));
  mark();
  while (!(await reader.read()).done);
}

let firstEventAt = 0;
function mark(): void {
  firstEventAt = performance.now();
}

async function drainAfterFirst<T>(iterable: AsyncIterable<T>): Promise<void> {
  let first = true;
  for await (const _ of iterable) {
    if (first) {
      mark();
      first = false;
    }
  }
}

interface Variant {
  name: string;
  vendor: 'OpenAI' | 'Bedrock';
  stream: boolean;
  run: () => Promise<void>;
}

const variants: Variant[] = [
  { name: 'bare fetch', vendor: 'OpenAI', stream: false, run: () => bareFetch(false) },
  { name: 'openai SDK', vendor: 'OpenAI', stream: false, run: async () => void (await sdk.chat.completions.create(chatBody)) },
  { name: 'Hub acompletion', vendor: 'OpenAI', stream: false, run: async () => void (await acompletion({ ...hubOptions, ...chatBody })) },
  { name: 'Hub amessages (converted)', vendor: 'OpenAI', stream: false, run: async () => void (await amessages(messagesRequest)) },
  { name: 'bare fetch', vendor: 'OpenAI', stream: true, run: () => bareFetch(true) },
  { name: 'openai SDK', vendor: 'OpenAI', stream: true, run: async () => drainAfterFirst(await sdk.chat.completions.create({ ...chatBody, stream: true })) },
  { name: 'Hub acompletion', vendor: 'OpenAI', stream: true, run: () => drainAfterFirst(acompletion({ ...hubOptions, ...chatBody, stream: true })) },
  { name: 'Hub amessages (converted)', vendor: 'OpenAI', stream: true, run: () => drainAfterFirst(amessages({ ...messagesRequest, stream: true })) },
  { name: 'bare fetch (Converse)', vendor: 'Bedrock', stream: false, run: () => bareBedrockFetch(false) },
  { name: 'AWS SDK ConverseCommand', vendor: 'Bedrock', stream: false, run: async () => void (await bedrockSdk.send(new ConverseCommand(converseInput))) },
  { name: 'Hub amessages (bedrock)', vendor: 'Bedrock', stream: false, run: async () => void (await amessages(bedrockRequest)) },
  { name: 'bare fetch (ConverseStream)', vendor: 'Bedrock', stream: true, run: () => bareBedrockFetch(true) },
  { name: 'AWS SDK ConverseStreamCommand', vendor: 'Bedrock', stream: true, run: async () => drainAfterFirst((await bedrockSdk.send(new ConverseStreamCommand(converseInput))).stream!) },
  { name: 'Hub amessages (bedrock)', vendor: 'Bedrock', stream: true, run: () => drainAfterFirst(amessages({ ...bedrockRequest, stream: true })) },
];

const samples = new Map<Variant, number[]>(variants.map((v) => [v, []]));
for (const variant of variants) for (let i = 0; i < 50; i++) await variant.run(); // warm-up: JIT, connections

for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < CALLS; i++) {
    for (const variant of variants) {
      const start = performance.now();
      await variant.run();
      const end = variant.stream ? firstEventAt : performance.now();
      samples.get(variant)!.push(end - start);
    }
  }
}
await fake.close();
await bedrockFake.close();

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

for (const [vendor, stream] of [['OpenAI', false], ['OpenAI', true], ['Bedrock', false], ['Bedrock', true]] as const) {
  const group = variants.filter((v) => v.vendor === vendor && v.stream === stream);
  const bare = samples.get(group[0]!)!;
  const bareP50 = percentile(bare, 50);
  const bareP99 = percentile(bare, 99);
  printTable(
    `${vendor}, ${stream ? 'streaming: time to first event (ms)' : 'non-streaming: time to the parsed answer (ms)'}`,
    ['variant', 'p50', 'p99', 'added p50 vs bare fetch', 'added p99 vs bare fetch'],
    group.map((variant) => {
      const values = samples.get(variant)!;
      const p50 = percentile(values, 50);
      const p99 = percentile(values, 99);
      return [variant.name, ms(p50), ms(p99), variant === group[0] ? '—' : ms(p50 - bareP50), variant === group[0] ? '—' : ms(p99 - bareP99)];
    }),
  );
}
console.log(`\n${ROUNDS} rounds × ${CALLS} calls per variant, interleaved; Node ${process.version}; OpenAI fake in its own process, Bedrock fake in this one.`);
