/**
 * What the soak sends: one operation per kind of request, each knowing what a correct answer is, which faults it
 * injects (so an error it causes is counted as injected, not as a failure) and whether the gateway must bill it.
 */
import OpenAI from 'openai';
import type { grpcClient } from '../../test/helpers/served-model.ts';
import { DEFAULT_COMPLETION_TEXT, DEFAULT_STREAM_PIECES } from '../../test/fakes/openai-compatible.ts';
import { faultMarker, SLOW_MS, type ProviderFault } from './provider.ts';

export type Verdict = 'ok' | 'injected' | 'unexpected';

export interface Outcome {
  verdict: Verdict;
  /** What happened, e.g. `200`, `502 (provider 500)`, `client abort`, `503 (MCP server killed)`. */
  label: string;
}

/** How many usage rows the gateway must hold for a call: one, none (refused before the provider), or at most one. */
export type RowsExpected = 'one' | 'none' | 'at-most-one';

export interface Billing {
  requestId: string;
  rows: RowsExpected;
  outcome: string;
}

export interface SoakTargets {
  modelUrl: string;
  grpc: ReturnType<typeof grpcClient>;
  gateway: OpenAI;
  toolsUrl: string;
  mcpKills: Kills;
  gatewayKills: Kills;
}

export interface Operation {
  name: string;
  service: 'model server' | 'gateway' | 'tool server';
  /** How often it is picked, relative to the others. */
  weight: number;
  run(n: number, targets: SoakTargets): Promise<{ outcome: Outcome; billing?: Billing }>;
}

const ok = (label = 'ok'): Outcome => ({ verdict: 'ok', label });
const injected = (label: string): Outcome => ({ verdict: 'injected', label });
const unexpected = (label: string): Outcome => ({ verdict: 'unexpected', label });

/**
 * When the soak killed a process (the tool server's MCP server, the gateway): a failure of a call to it is injected if
 * a kill happened before the answer and no call started after that kill had succeeded before this call started (the
 * process was down, or coming back).
 */
export class Kills {
  readonly #kills: { at: number; recoveredAt: number | null }[] = [];

  killed(at = performance.now()): void {
    this.#kills.push({ at, recoveredAt: null });
  }

  succeeded(startedAt: number, at = performance.now()): void {
    for (const kill of this.#kills) if (kill.recoveredAt === null && startedAt >= kill.at) kill.recoveredAt = at;
  }

  explains(startedAt: number, endedAt: number): boolean {
    return this.#kills.some((kill) => kill.at <= endedAt && (kill.recoveredAt === null || kill.recoveredAt >= startedAt));
  }

  get count(): number {
    return this.#kills.length;
  }
}

// ---- the gateway, through the official openai client (what its users hold) ---------------------------------------

/** The served model's name: the gateway reaches it as `encoder:<name>`. */
export const MODEL_NAME = 'soak';
const CHAT_MODEL = 'openai:gpt-fake';
const EMBEDDING_MODEL = 'openai:fake-embedder';

/** The outcome of a gateway call that a kill of the gateway explains (a cut connection, refused while it restarts). */
export const GATEWAY_KILLED = 'gateway killed';

/** Outcome of a gateway call that threw: its status, or what the client saw. */
function gatewayFailure(error: unknown): string {
  if (error instanceof OpenAI.APIUserAbortError) return 'client abort';
  if (error instanceof OpenAI.APIConnectionError) return `connection error: ${error.message}`;
  if (error instanceof OpenAI.APIError) return error.status === undefined ? `stream error ${error.type ?? ''}`.trim() : String(error.status);
  return `exception: ${(error as Error).message}`;
}

/** Runs a gateway call with its request id; `expect` turns what happened (200 or the failure) into an outcome. */
function gatewayOperation(
  name: string,
  weight: number,
  rows: RowsExpected,
  call: (gateway: OpenAI, options: OpenAI.RequestOptions, n: number) => Promise<Outcome>,
  onFailure: (failure: string) => Outcome,
): Operation {
  return {
    name,
    service: 'gateway',
    weight,
    async run(n, { gateway, gatewayKills }) {
      const requestId = `soak-${n}`;
      const startedAt = performance.now();
      let outcome: Outcome;
      try {
        outcome = await call(gateway, { headers: { 'x-request-id': requestId } }, n);
        if (outcome.verdict === 'ok') gatewayKills.succeeded(startedAt);
      } catch (error) {
        outcome = onFailure(gatewayFailure(error));
      }
      // A call that did not succeed while the gateway was killed may have been cut by the kill (its row interrupted);
      // whether it must have a row depends on whether the provider got it (main.ts decides).
      if (outcome.verdict !== 'ok' && gatewayKills.explains(startedAt, performance.now())) outcome = injected(GATEWAY_KILLED);
      return { outcome, billing: { requestId, rows, outcome: outcome.label } };
    },
  };
}

/** The request id a provider request belongs to: the soak puts `soak <n>` in every prompt. */
export const requestIdIn = (text: string) => /soak (?:request )?(\d+)/.exec(text)?.[1];

const chatOf = (n: number, fault?: ProviderFault) => ({
  model: CHAT_MODEL,
  messages: [{ role: 'user' as const, content: `soak request ${n}${fault ? ` ${faultMarker(fault)}` : ''}` }],
});

/** A failure that the operation's injected fault explains, else unexpected. */
const expected = (wanted: string, label: string) => (failure: string) => (failure === wanted ? injected(label) : unexpected(failure));
const noFailure = (failure: string) => unexpected(failure);

export const OPERATIONS: Operation[] = [
  gatewayOperation('chat', 6, 'one', async (gateway, options, n) => {
    const completion = await gateway.chat.completions.create(chatOf(n), options);
    return completion.choices[0]?.message.content === DEFAULT_COMPLETION_TEXT ? ok('200') : unexpected('200 with another answer');
  }, noFailure),
  gatewayOperation('chat, streamed', 6, 'one', async (gateway, options, n) => {
    let text = '';
    for await (const chunk of await gateway.chat.completions.create({ ...chatOf(n), stream: true }, options)) text += chunk.choices[0]?.delta?.content ?? '';
    return text === DEFAULT_STREAM_PIECES.join('') ? ok('200') : unexpected('200 with another answer');
  }, noFailure),
  gatewayOperation('embeddings (fake provider)', 3, 'one', async (gateway, options, n) => {
    const result = await gateway.embeddings.create({ model: EMBEDDING_MODEL, input: [`soak ${n}`, 'second input'] }, options);
    return result.data.length === 2 ? ok('200') : unexpected('200 with another answer');
  }, noFailure),
  gatewayOperation('embeddings (model server)', 3, 'one', async (gateway, options, n) => {
    const result = await gateway.embeddings.create({ model: `encoder:${MODEL_NAME}`, input: [`soak ${n}`, 'the quick brown fox'], encoding_format: 'float' }, options);
    return result.data.length === 2 && result.data.every((item) => item.embedding.length > 0) ? ok('200') : unexpected('200 with another answer');
  }, noFailure),
  gatewayOperation('chat, invalid (empty messages)', 1, 'none', async (gateway, options) => {
    await gateway.chat.completions.create({ model: CHAT_MODEL, messages: [] }, options);
    return unexpected('200 for an invalid request');
  }, (failure) => (failure === '400' ? ok('400') : unexpected(failure))),
  gatewayOperation('chat, provider 500', 1, 'one', async (gateway, options, n) => {
    await gateway.chat.completions.create(chatOf(n, 'error-500'), options);
    return unexpected('200 despite the provider failing');
  }, expected('502', '502 (provider 500)')),
  gatewayOperation('chat, provider stalls', 1, 'one', async (gateway, options, n) => {
    await gateway.chat.completions.create(chatOf(n, 'stall'), options);
    return unexpected('200 despite the provider stalling');
  }, expected('504', '504 (provider stalls)')),
  gatewayOperation('chat, streamed, provider stalls', 1, 'one', async (gateway, options, n) => {
    for await (const _ of await gateway.chat.completions.create({ ...chatOf(n, 'stall-stream'), stream: true }, options));
    return unexpected('stream ended normally despite the provider stalling');
  }, expected('stream error timeout_error', 'stream error timeout_error (provider stalls)')),
  gatewayOperation('chat, client aborts', 1, 'at-most-one', async (gateway, options, n) => {
    // aborted mid-flight: the provider answers after SLOW_MS
    await gateway.chat.completions.create(chatOf(n, 'slow'), { ...options, signal: AbortSignal.timeout(SLOW_MS / 4) });
    return ok('200 (before the abort)');
  }, expected('client abort', 'client abort')),
  gatewayOperation('chat, streamed, client aborts', 1, 'one', async (gateway, options, n) => {
    // aborted after the first chunk: the gateway has begun the call, so it must bill it (cancelled)
    const controller = new AbortController();
    for await (const _ of await gateway.chat.completions.create({ ...chatOf(n, 'slow-stream'), stream: true }, { ...options, signal: controller.signal })) controller.abort();
    // the client's stream iterator ends quietly when its own signal aborts it
    return controller.signal.aborted ? injected('client abort') : unexpected('stream ended without the abort');
  }, expected('client abort', 'client abort')),

  // ---- the model server -------------------------------------------------------------------------------------------
  {
    name: 'predict (HTTP)',
    service: 'model server',
    weight: 5,
    async run(n, { modelUrl }) {
      const inputs = inputsOf(n);
      const response = await post(`${modelUrl}/predict`, { inputs });
      if (response.status !== 200) return { outcome: unexpected(String(response.status)) };
      const body = (await response.json()) as { results?: unknown[] };
      return { outcome: body.results?.length === inputs.length ? ok('200') : unexpected('200 with another answer') };
    },
  },
  {
    name: 'predict (gRPC)',
    service: 'model server',
    weight: 3,
    async run(n, { grpc }) {
      const inputs = inputsOf(n);
      try {
        const result = await grpc.predict({ inputs });
        return { outcome: (result.results as unknown[]).length === inputs.length ? ok('OK') : unexpected('OK with another answer') };
      } catch (error) {
        return { outcome: unexpected(`gRPC ${(error as { code?: number }).code}`) };
      }
    },
  },
  {
    name: 'predict, invalid (no inputs)',
    service: 'model server',
    weight: 1,
    async run(_n, { modelUrl }) {
      const response = await post(`${modelUrl}/predict`, { inputs: [] });
      await response.text();
      return { outcome: response.status === 422 ? ok('422') : unexpected(String(response.status)) };
    },
  },
  {
    name: 'predict, client aborts',
    service: 'model server',
    weight: 1,
    async run(n, { modelUrl }) {
      try {
        const response = await post(`${modelUrl}/predict`, { inputs: inputsOf(n) }, AbortSignal.timeout(1 + (n % 4)));
        await response.text();
        return { outcome: response.status === 200 ? ok('200 (before the abort)') : unexpected(String(response.status)) };
      } catch (error) {
        return { outcome: (error as Error).name === 'TimeoutError' ? injected('client abort') : unexpected(`exception: ${(error as Error).message}`) };
      }
    },
  },

  // ---- the tool server (server-everything over stdio, killed now and then) ------------------------------------------
  toolOperation('tool call', 4, 'echo', (n) => ({ message: `soak ${n}` }), (status, body, n) => (status === 200 && body === JSON.stringify(`Echo: soak ${n}`) ? ok('200') : null)),
  toolOperation('tool call, unknown tool', 1, 'no-such-tool', () => ({}), (status) => (status === 404 ? ok('404') : null)),
  toolOperation('tool call, client aborts', 1, 'trigger-long-running-operation', () => ({ duration: 2, steps: 2 }), (status) => (status === 200 ? ok('200 (before the abort)') : null), 300),
];

const WORDS = ['the', 'quick', 'brown', 'fox', 'jumps', 'over', 'lazy', 'dog', 'model', 'server', 'batch', 'token'];
const inputsOf = (n: number) => Array.from({ length: 1 + (n % 3) }, (_, i) => Array.from({ length: 3 + ((n + i) % 12) }, (_, j) => WORDS[(n + i * 5 + j) % WORDS.length]).join(' '));

function post(url: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal });
}

/**
 * A tool call; `judge` returns the outcome of an answer, or null when the answer is wrong. A 503 while the MCP server
 * is down after a kill is injected; with `abortAfterMs`, the client aborts the call then.
 */
function toolOperation(
  name: string,
  weight: number,
  tool: string,
  args: (n: number) => unknown,
  judge: (status: number, body: string, n: number) => Outcome | null,
  abortAfterMs?: number,
): Operation {
  return {
    name,
    service: 'tool server',
    weight,
    async run(n, { toolsUrl, mcpKills }) {
      const startedAt = performance.now();
      try {
        const response = await post(`${toolsUrl}/api/v1/servers/everything/tools/${tool}`, args(n), abortAfterMs ? AbortSignal.timeout(abortAfterMs) : undefined);
        const body = await response.text();
        const outcome = judge(response.status, body, n);
        if (outcome) {
          mcpKills.succeeded(startedAt);
          return { outcome };
        }
        if (response.status === 503 && mcpKills.explains(startedAt, performance.now())) return { outcome: injected('503 (MCP server killed)') };
        return { outcome: unexpected(`${response.status} ${body.slice(0, 200)}`) };
      } catch (error) {
        if ((error as Error).name === 'TimeoutError' && abortAfterMs) return { outcome: injected('client abort') };
        return { outcome: unexpected(`exception: ${(error as Error).message}`) };
      }
    },
  };
}
