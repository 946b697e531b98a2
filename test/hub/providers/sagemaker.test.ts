import { describe, expect, it } from 'vitest';
import { acompletion, aembedding, amessages } from '../../../src/hub/index.ts';
import { AuthenticationError, InvalidRequestError, ProviderError, RateLimitError, UnsupportedParameterError } from '../../../src/hub/errors.ts';
import { awsError, TEST_ACCESS_KEY_ID } from '../../fakes/bedrock.ts';
import { modelStreamErrorFrame, SAGEMAKER_USAGE, sseFrames, startSagemakerFake, stream, chatChunks } from '../../fakes/sagemaker.ts';
import { bodyOf, fakeVector, type VendorServer } from '../../fakes/vendor-server.ts';
import { collect, failureOf, useVendorFake } from '../helpers.ts';

let fake: VendorServer;
useVendorFake(startSagemakerFake, (started) => (fake = started));

const credentials = { accessKeyId: TEST_ACCESS_KEY_ID, secretAccessKey: 'secret' };
const opts = (client_args: Record<string, unknown> = {}) => ({
  provider: 'sagemaker', api_base: fake.url, client_args: { region: 'eu-west-1', credentials, ...client_args }, max_retries: 0, unified_exceptions: true,
});
const hi = [{ role: 'user' as const, content: 'hi' }];

describe('sagemaker', () => {
  it('messages: InvokeEndpoint on the endpoint named by the model, SigV4-signed, with an OpenAI chat body', async () => {
    const message = await amessages({ ...opts(), model: 'chat-endpoint', max_tokens: 20, system: 'brief', temperature: 0.5, messages: hi });
    expect(message).toMatchObject({ content: [{ type: 'text', text: 'echo: hi' }], stop_reason: 'end_turn', usage: { input_tokens: 9, output_tokens: 3 } });
    const request = fake.lastRequest;
    expect(request.path).toBe('/endpoints/chat-endpoint/invocations');
    expect(String(request.headers.authorization)).toMatch(/Credential=AKIDFAKEBEDROCKTEST\/\d{8}\/eu-west-1\/sagemaker\/aws4_request/);
    expect(bodyOf(request)).toEqual({ messages: [{ role: 'system', content: 'brief' }, { role: 'user', content: 'hi' }], max_tokens: 20, temperature: 0.5 });
  });

  it('completion: a TGI-style [{generated_text}] answer becomes one choice', async () => {
    const completion = await acompletion({ ...opts(), model: 'tgi-endpoint', messages: hi });
    expect(completion).toMatchObject({ object: 'chat.completion', model: 'tgi-endpoint', choices: [{ message: { role: 'assistant', content: 'generated for hi' }, finish_reason: 'stop' }] });
  });

  it('streams: PayloadPart bytes cut anywhere are joined into SSE events; stream: true in the body', async () => {
    const events = await collect(amessages({ ...opts(), model: 'chat-endpoint', max_tokens: 20, messages: [{ role: 'user', content: 'stream please' }], stream: true }));
    const textOut = events.flatMap((e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? [e.delta.text] : [])).join('');
    expect(textOut).toBe('echo: stream please');
    expect(events.find((e) => e.type === 'message_delta')).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } });
    expect(fake.lastRequest.path).toBe('/endpoints/chat-endpoint/invocations-response-stream');
    expect(bodyOf(fake.lastRequest)).toMatchObject({ stream: true });
    expect(bodyOf(fake.lastRequest)).not.toHaveProperty('stream_options');
  });

  it('a TGI generate_stream ({token}, final generated_text and details) streams as chunks', async () => {
    const tokens = [{ token: { text: 'Hel' } }, { token: { text: 'lo' } }, { token: { text: '</s>', special: true }, generated_text: 'Hello', details: { finish_reason: 'length' } }];
    fake.enqueue(stream(sseFrames(tokens, false)));
    const chunks = await collect(acompletion({ ...opts(), model: 'chat-endpoint', messages: hi, stream: true }));
    expect(chunks.map((c) => c.choices[0]!.delta.content).join('')).toBe('Hello');
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('length');
  });

  it('a stream cut before its finish reason, or failing with ModelStreamError, raises after what came', async () => {
    const frames = sseFrames(chatChunks({ messages: hi }), false);
    fake.enqueue(stream(frames.slice(0, frames.length - 12)));
    expect(await failureOf(collect(acompletion({ ...opts(), model: 'chat-endpoint', messages: hi, stream: true })))).toBeInstanceOf(ProviderError);
    fake.enqueue(stream([...frames.slice(0, 5), modelStreamErrorFrame('container crashed')]));
    const failed = await failureOf(collect(amessages({ ...opts(), model: 'chat-endpoint', max_tokens: 5, messages: hi, stream: true })));
    expect(failed).toBeInstanceOf(ProviderError);
  });

  it('embeddings: one call per text, {inputs, dimensions}; bare TEI vectors read', async () => {
    const answer = await aembedding({ ...opts(), model: 'embed-endpoint', inputs: ['ab', 'cde'], dimensions: 6 });
    expect(answer.data.map((d) => d.embedding)).toEqual([fakeVector('ab', 6), fakeVector('cde', 6)]);
    expect(fake.requests.map((r) => bodyOf(r))).toEqual([{ inputs: 'ab', dimensions: 6 }, { inputs: 'cde', dimensions: 6 }]);
  });

  it('refuses structured output, thinking and listing before sending', async () => {
    const schema = { type: 'json_schema', schema: { type: 'object' } };
    expect(await failureOf(amessages({ ...opts(), model: 'chat-endpoint', max_tokens: 5, messages: hi, output_format: schema }))).toMatchObject({ constructor: UnsupportedParameterError, parameter_name: 'output_format' });
    expect(await failureOf(acompletion({ ...opts(), model: 'chat-endpoint', messages: hi, response_format: { type: 'json_object' } }))).toMatchObject({ constructor: UnsupportedParameterError, parameter_name: 'response_format' });
    expect(await failureOf(amessages({ ...opts(), model: 'chat-endpoint', max_tokens: 2048, messages: hi, thinking: { type: 'enabled', budget_tokens: 1024 } }))).toBeInstanceOf(UnsupportedParameterError);
    expect(fake.requests).toHaveLength(0);
  });

  it('errors: ModelError takes the container’s status; throttling, unknown endpoint and bad credentials map', async () => {
    fake.enqueue({ status: 424, headers: { 'x-amzn-errortype': 'ModelError:http://internal.amazon.com/coral/com.amazon.sagemaker/' }, json: { message: 'Received client error (429) from primary', OriginalStatusCode: 429, OriginalMessage: 'too many requests' } });
    expect(await failureOf(amessages({ ...opts(), model: 'chat-endpoint', max_tokens: 5, messages: hi }))).toMatchObject({ constructor: RateLimitError, status_code: 429 });
    fake.enqueue(awsError(400, 'ValidationError', 'Input validation failed'));
    expect(await failureOf(amessages({ ...opts(), model: 'chat-endpoint', max_tokens: 5, messages: hi }))).toBeInstanceOf(InvalidRequestError);
    const denied = await failureOf(amessages({ ...opts({ credentials: { accessKeyId: 'AKIDOTHER', secretAccessKey: 's' } }), model: 'chat-endpoint', max_tokens: 5, messages: hi }));
    expect(denied).toBeInstanceOf(AuthenticationError);
  });

  it('usage from the answer', async () => {
    expect((await acompletion({ ...opts(), model: 'chat-endpoint', messages: hi })).usage).toEqual(SAGEMAKER_USAGE);
  });
});
