import OpenAI from 'openai';

/** POSTs `body` as JSON to `path` and resolves with the parsed answer, as the SDK's `client.post` would. */
export type JsonPost = (path: string, body: object, signal: AbortSignal | undefined) => Promise<unknown>;

interface PreparedRequest {
  url: string;
  headers: Readonly<Record<string, string>>;
  timeout: number;
}

/** Log levels at which the SDK writes nothing for a call that succeeds or fails without retries. */
const QUIET_LOG_LEVELS = new Set(['off', 'error', 'warn']);

/**
 * Non-streamed JSON calls of a plain SDK client (its only client_args a `fetch`, no retries, no request logging, no
 * idempotency keys), sent as the SDK sends them without its per-call machinery. Per call the SDK merges and validates
 * its headers into a new `Headers`, formats a log record that is dropped, chains several promises and timers, and
 * wraps the answer: more CPU than the rest of a gateway request together (docs/benchmarks.md, "Session 13"). Here the
 * SDK builds each path's request once (address with default query, headers with auth, organization, project and
 * platform), and a call reuses it; its failures become the SDK's own errors (APIError.generate, the connection,
 * timeout and abort errors), so everything above sees what the SDK would throw. Undefined for any other client: it
 * goes through the SDK.
 */
export function createJsonPost(client: OpenAI, clientArgs: Record<string, unknown> | undefined): JsonPost | undefined {
  const plain = Object.keys(clientArgs ?? {}).every((name) => name === 'fetch');
  // A client that sends an idempotency key makes a new one per call: its headers cannot be built once.
  const idempotent = (client as unknown as { idempotencyHeader?: string }).idempotencyHeader !== undefined;
  if (!plain || idempotent || client.maxRetries !== 0 || !QUIET_LOG_LEVELS.has(client.logLevel ?? 'warn')) return undefined;
  const send = (clientArgs?.fetch as typeof fetch | undefined) ?? fetch;
  const prepared = new Map<string, Promise<PreparedRequest>>();
  const prepare = (path: string): Promise<PreparedRequest> => {
    let request = prepared.get(path);
    if (!request) {
      request = client.buildRequest({ method: 'post', path, body: {} }).then(({ req, url, timeout }) => {
        const headers: Record<string, string> = {};
        new Headers(req.headers as ConstructorParameters<typeof Headers>[0]).forEach((value, name) => (headers[name] = value));
        // frozen: one record serves every call, so a fetch that changed it would change the calls after it
        return { url, headers: Object.freeze(headers), timeout };
      });
      request.catch(() => prepared.delete(path)); // a failure is the call's; the next call builds again
      prepared.set(path, request);
    }
    return request;
  };

  return async (path, body, signal) => {
    if (signal?.aborted) throw new OpenAI.APIUserAbortError();
    const { url, headers, timeout } = await prepare(path);
    const controller = new AbortController();
    const abort = () => controller.abort();
    signal?.addEventListener('abort', abort, { once: true });
    try {
      let response: Response;
      const timer = setTimeout(abort, timeout);
      try {
        response = await send(url, { method: 'POST', headers, body: JSON.stringify(body), signal: controller.signal });
      } catch (error) {
        if (signal?.aborted) throw new OpenAI.APIUserAbortError();
        if (isAbortError(error) || /timed? ?out/i.test(String(error) + (error instanceof Error && 'cause' in error ? String(error.cause) : ''))) {
          throw new OpenAI.APIConnectionTimeoutError();
        }
        throw new OpenAI.APIConnectionError({ cause: error instanceof Error ? error : new Error(String(error)) });
      } finally {
        clearTimeout(timer);
      }
      return await answerOf(response);
    } finally {
      signal?.removeEventListener('abort', abort);
    }
  };
}

/** The SDK's reading of an answer: its status error, null for 204, JSON (with `_request_id`) or else the text. */
async function answerOf(response: Response): Promise<unknown> {
  if (!response.ok) {
    const text = await response.text().catch((error: unknown) => (error instanceof Error ? error.message : String(error)));
    const json = parseJson(text);
    throw OpenAI.APIError.generate(response.status, json, json ? undefined : text, response.headers);
  }
  if (response.status === 204) return null;
  const mediaType = response.headers.get('content-type')?.split(';')[0]?.trim();
  if (!(mediaType?.includes('application/json') || mediaType?.endsWith('+json'))) return response.text();
  if (response.headers.get('content-length') === '0') return undefined;
  const json: unknown = await response.json();
  if (!json || typeof json !== 'object' || Array.isArray(json)) return json;
  return Object.defineProperty(json, '_request_id', { value: response.headers.get('x-request-id'), enumerable: false });
}

function parseJson(text: string): object | undefined {
  try {
    return JSON.parse(text) as object;
  } catch {
    return undefined;
  }
}

function isAbortError(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'name' in error && error.name === 'AbortError';
}
