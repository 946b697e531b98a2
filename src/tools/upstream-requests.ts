import { UriTemplate } from '@modelcontextprotocol/sdk/shared/uriTemplate.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ProgressNotificationSchema, type CallToolResult, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { ToolsError } from './errors.ts';

/** Lists of a misbehaving server that never ends its cursor chain stop here. */
const MAX_PAGES = 1000;

export interface RequestOptions {
  /** Aborted when the request's caller no longer wants the answer (an HTTP client that went away). */
  signal?: AbortSignal;
  /** The caller's `_meta` (an MCP client's), passed on as it is but for `progressToken`: see `onprogress`. */
  meta?: Record<string, unknown>;
  /** The server's progress notifications for this request (a progress token of ProgressRoutes is sent with it). */
  onprogress?: (progress: Progress) => void;
}

/** Every page of a cursor list (a cursor seen before ends it). */
export async function collectPages<Page extends { nextCursor?: string }, Item>(fetchPage: (cursor: string | undefined) => Promise<Page>, itemsOf: (page: Page) => Item[]): Promise<Item[]> {
  const items: Item[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await fetchPage(cursor);
    items.push(...itemsOf(result));
    cursor = result.nextCursor;
    if (cursor === undefined || seen.has(cursor)) break;
    seen.add(cursor);
  }
  return items;
}

/** Whether `uri` is one of a resource template's (an invalid template matches nothing). */
export function matchesTemplate(uri: string, uriTemplate: string): boolean {
  try {
    return new UriTemplate(uriTemplate).match(uri) !== null;
  } catch {
    return false;
  }
}

/** `_meta` to send on: the caller's, without its progress token (the SDK sends its own with `onprogress`). */
export function forwardedMeta(options: RequestOptions): { _meta?: Record<string, unknown> } {
  if (!options.meta) return {};
  const { progressToken: _, ...meta } = options.meta;
  return Object.keys(meta).length ? { _meta: meta } : {};
}

/**
 * Progress notifications of a server, to the callback of the request whose token they carry. The SDK's own
 * `onprogress` forgets a request's callback as soon as its answer is read, so that a last progress notification read
 * in the same chunk as the answer (its handler runs a moment later) was dropped; here a callback lives until the
 * request's caller has the answer.
 */
export class ProgressRoutes {
  readonly #callbacks = new Map<string, (progress: Progress) => void>();
  #next = 0;

  /** Replaces the SDK's handling of `client`'s progress notifications. */
  listen(client: Client): void {
    client.setNotificationHandler(ProgressNotificationSchema, ({ params: { progressToken, ...progress } }) => this.#callbacks.get(String(progressToken))?.(progress));
  }

  /** Runs a request with the caller's `_meta` and, when the caller wants progress, a token of its own. */
  async with<T>(options: RequestOptions, run: (params: { _meta?: Record<string, unknown> }) => Promise<T>): Promise<T> {
    const params = forwardedMeta(options);
    if (!options.onprogress) return run(params);
    const token = `progress-${++this.#next}`;
    this.#callbacks.set(token, options.onprogress);
    try {
      return await run({ _meta: { ...params._meta, progressToken: token } });
    } finally {
      this.#callbacks.delete(token);
    }
  }
}

export function cancelled(server: string, signal: AbortSignal, cause?: unknown): ToolsError {
  const reason = signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? 'aborted');
  return new ToolsError('cancelled', `request to server "${server}" cancelled: ${reason}`, { cause: cause ?? signal.reason });
}

/** The text of all text content items, joined with a newline. */
export function textOf(result: CallToolResult): string {
  return result.content
    .filter((item): item is { type: 'text'; text: string } => item.type === 'text')
    .map((item) => item.text)
    .join('\n');
}
