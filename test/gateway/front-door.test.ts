import http from 'node:http';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthThrottle, clientOf } from '../../src/gateway/auth-throttle.ts';
import { defaultFrontDoor } from '../../src/gateway/front-door-settings.ts';
import { jsonNestsDeeper } from '../../src/gateway/http/front-door.ts';
import { MASTER_KEY, TEST_PRICING, sqliteBackend, startTestGateway, useFakeProvider, type TestGateway } from './helpers/gateway.ts';

const fake = await useFakeProvider();
const backend = sqliteBackend();
/** A short throttle window, so that its end is seen within the test. */
const THROTTLE = { maxFailures: 5, windowSeconds: 2 };
let gateway: TestGateway;
let port: number;

beforeAll(async () => {
  gateway = await startTestGateway(await backend.newDatabaseUrl(), {
    providers: { openai: { api_key: 'sk-provider', api_base: fake.baseURL } },
    pricing: { 'openai:gpt-fake': TEST_PRICING },
    frontDoor: { ...defaultFrontDoor(), authThrottle: THROTTLE },
  });
  port = Number(new URL(gateway.url).port);
});
afterAll(async () => {
  await gateway?.close();
  await backend.close();
});

type Answer = { status: number; headers: http.IncomingHttpHeaders; json: { error: { code: string; type: string } } };

/**
 * A request from `localAddress` (another loopback address is another client) that announces `announced` body bytes but
 * sends only `sent` of them: an answer proves the gateway did not wait for the body.
 */
function request(method: string, path: string, options: { key?: string; localAddress?: string; announced?: number; sent?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = {};
    if (options.key) headers['x-hub-key'] = `Bearer ${options.key}`;
    if (options.announced !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': options.announced });
    const outgoing = http.request({ host: '127.0.0.1', port, method, path, headers, localAddress: options.localAddress ?? '127.0.0.1', agent: false }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () => {
        resolve({ status: response.statusCode!, headers: response.headers, json: text ? JSON.parse(text) : null });
        outgoing.destroy();
      });
    });
    outgoing.on('error', reject);
    if (options.sent !== undefined) outgoing.write(options.sent);
    if (options.announced === undefined) outgoing.end();
  });
}

describe('authentication before the body is read', () => {
  it('a management call with a wrong key is 401, with a virtual key 403, while its body has not arrived', async () => {
    const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'caller' } })).json.key as string;
    const partial = { announced: 60_000, sent: '{"user_id":"x",' };
    const wrong = await request('POST', '/v1/users', { ...partial, key: 'not-the-key', localAddress: '127.0.0.10' });
    expect(wrong.status).toBe(401);
    expect(wrong.json.error).toMatchObject({ code: 'invalid_api_key', type: 'authentication_error' });
    const virtual = await request('POST', '/v1/users', { ...partial, key });
    expect(virtual.status).toBe(403);
    expect(virtual.json.error.code).toBe('master_key_required');
    const none = await request('POST', '/v1/chat/completions', { announced: 1_000_000, sent: '{"model":' });
    expect(none.json.error.code).toBe('missing_api_key');
    // An unknown route is answered from its headers too, not after reading its body.
    const unknown = await request('POST', '/v1/nothing-here', { announced: 1_000_000, sent: '[' });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe('route_not_found');
    expect((await gateway.call('GET', '/v1/users')).status).toBe(200);
  });

  it('the management body limit is 64 KiB (413), model calls keep 16 MiB', async () => {
    const big = { user_id: 'big', alias: 'x'.repeat(70_000) };
    const refused = await gateway.call('POST', '/v1/users', { body: big });
    expect(refused.status).toBe(413);
    expect(refused.json.error).toMatchObject({ code: 'body_too_large', message: 'Request body is too large: the limit is 65536 bytes' });
    const chat = await gateway.call('POST', '/v1/chat/completions', {
      body: { model: 'openai:gpt-fake', user: 'nobody', messages: [{ role: 'user', content: 'x'.repeat(100_000) }] },
    });
    expect(chat.json.error.code).toBe('user_not_found'); // read and parsed: 100 KB is well within a model call's limit
  });
});

describe('the failed-key throttle', () => {
  it('after 5 invalid keys a client meets 429 with Retry-After, the right key included; other clients are not affected; it ends with the window', async () => {
    const from = '127.0.0.5';
    for (let i = 0; i < THROTTLE.maxFailures; i++) {
      const guess = await request('GET', '/v1/users', { key: i % 2 ? `guess-${i}` : `gw-guess-${i}`, localAddress: from });
      expect(guess.status).toBe(401);
    }
    const throttled = await request('GET', '/v1/users', { key: 'guess-again', localAddress: from });
    expect(throttled.status).toBe(429);
    expect(throttled.json.error).toMatchObject({ code: 'too_many_auth_failures', type: 'rate_limit_error' });
    const retryAfter = Number(throttled.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(THROTTLE.windowSeconds);
    // A guess cannot be confirmed while throttled: the master key from that client is refused as well, before the body.
    const right = await request('POST', '/v1/users', { key: MASTER_KEY, localAddress: from, announced: 1000, sent: '{' });
    expect(right.status).toBe(429);
    // Another client is served.
    expect((await request('GET', '/v1/users', { key: MASTER_KEY, localAddress: '127.0.0.6' })).status).toBe(200);
    // The window ends: the client is served again.
    await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000 + 100));
    expect((await request('GET', '/v1/users', { key: MASTER_KEY, localAddress: from })).status).toBe(200);
    const metrics = (await gateway.call('GET', '/metrics')).json as string;
    expect(metrics).toMatch(/gateway_auth_failures_total\{reason="too_many_auth_failures"\} [1-9]/);
    expect(metrics).toMatch(/gateway_auth_failures_total\{reason="invalid_api_key"\} [1-9]/);
  }, 15_000);

  it('missing credentials, inactive keys and correct keys do not count as failures', async () => {
    const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'off' } })).json;
    await gateway.call('PATCH', `/v1/keys/${key.id}`, { body: { is_active: false } });
    const from = '127.0.0.7';
    for (let i = 0; i < 2 * THROTTLE.maxFailures; i++) {
      expect((await request('GET', '/v1/models', { localAddress: from })).json.error.code).toBe('missing_api_key');
      expect((await request('GET', '/v1/models', { key: key.key, localAddress: from })).json.error.code).toBe('key_inactive');
    }
    expect((await request('GET', '/v1/users', { key: MASTER_KEY, localAddress: from })).status).toBe(200);
  });

  it('remembers a bounded number of clients, and counts an IPv6 /64 as one client', () => {
    const throttle = new AuthThrottle({ maxFailures: 1, windowSeconds: 60 });
    for (let i = 0; i < 30_000; i++) throttle.fail(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, 1000);
    expect(throttle.size).toBeLessThanOrEqual(10_000);
    expect(throttle.retryAfter('10.0.117.47', 1000)).toBe(60); // among the newest: still remembered
    expect(throttle.retryAfter('10.0.117.47', 61_000)).toBe(0);
    expect(clientOf('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(clientOf('2001:db8:1:2:3:4:5:6')).toBe(clientOf('2001:db8:1:2::7'));
    expect(clientOf('2001:db8:1:2::7')).toBe('2001:db8:1:2::/64');
    expect(clientOf('2001:db8:1:3::7')).not.toBe(clientOf('2001:db8:1:2::7'));
    expect(clientOf('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
  });
});

describe('answers', () => {
  it('every API answer says Cache-Control: no-store and nosniff: key creation and rotation (secrets), errors, health', async () => {
    const created = await gateway.call('POST', '/v1/keys', { body: { key_name: 'secret' } });
    const rotated = await gateway.call('POST', `/v1/keys/${created.json.id}/rotate`, { body: {} });
    const refused = await gateway.call('GET', '/v1/keys', { key: 'wrong-but-counted-from-127.0.0.1' });
    for (const answer of [created, rotated, refused, await gateway.call('GET', '/health'), await gateway.call('GET', '/openapi.json')]) {
      expect(answer.headers.get('cache-control')).toBe('no-store');
      expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
    }
    expect(rotated.json.key).toMatch(/^gw-/);
  });

  it('a normal call with the openai client still works, plain and streamed, with a virtual key', async () => {
    const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'sdk' } })).json.key as string;
    const client = new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'hi' }] });
    expect(completion.choices[0].message.content).toBeTruthy();
    const { data, response } = await client.chat.completions.create({ model: 'openai:gpt-fake', messages: [{ role: 'user', content: 'hi' }], stream: true }).withResponse();
    expect(response.headers.get('cache-control')).toBe('no-store');
    let text = '';
    for await (const chunk of data) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBeTruthy();
    expect((await client.models.list()).data.length).toBeGreaterThan(0);
  });
});

describe('the JSON nesting bound', () => {
  it('counts arrays and objects, not brackets inside strings (escaped quotes included)', () => {
    expect(jsonNestsDeeper('[[[]]]', 3)).toBe(false);
    expect(jsonNestsDeeper('[[[[]]]]', 3)).toBe(true);
    expect(jsonNestsDeeper('{"a":{"b":[1,{"c":2}]}}', 4)).toBe(false);
    expect(jsonNestsDeeper('{"a":{"b":[1,{"c":2}]}}', 3)).toBe(true);
    expect(jsonNestsDeeper(`{"text":"${'[{'.repeat(1000)}"}`, 1)).toBe(false);
    expect(jsonNestsDeeper(String.raw`{"q":"say \"[[[[\" and \\","r":[[[1]]]}`, 3)).toBe(true);
    expect(jsonNestsDeeper(String.raw`{"q":"say \"[[[[\" and \\","r":[1]}`, 3)).toBe(false);
    expect(jsonNestsDeeper('['.repeat(1_000_000), 64)).toBe(true); // no recursion, no stack overflow
  });
});
