// Small JSON-over-HTTP client for providers without a usable SDK (Voyage AI, this project's encoder server).

/** A non-2xx answer: the status, headers and body text, for the provider's error hook. */
export class VendorHttpError extends Error {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
  /** The address asked (which operation failed). */
  readonly url: string;
  constructor(status: number, headers: Headers, body: string, url: string, options?: ErrorOptions) {
    super(`HTTP ${status} from ${new URL(url).pathname}: ${body.slice(0, 500)}`, options);
    this.name = 'VendorHttpError';
    this.status = status;
    this.headers = headers;
    this.body = body;
    this.url = url;
  }
}

export interface JsonRequest {
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: unknown;
  signal?: AbortSignal;
}

export async function requestJson<T>(url: string, request: JsonRequest = {}): Promise<T> {
  const response = await fetch(url, {
    method: request.method ?? (request.body === undefined ? 'GET' : 'POST'),
    headers: { accept: 'application/json', ...(request.body !== undefined ? { 'content-type': 'application/json' } : {}), ...request.headers },
    ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
    ...(request.signal ? { signal: request.signal } : {}),
  });
  const text = await response.text();
  if (!response.ok) throw new VendorHttpError(response.status, response.headers, text, url);
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    throw new VendorHttpError(response.status, response.headers, `response is not JSON: ${text.slice(0, 200)}`, url, { cause: error });
  }
}

/** Joins a base address and a path without doubling or losing the slash. */
export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, '')}/${path.replace(/^\/+/, '')}`;
}
