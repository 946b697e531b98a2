// Reads a text/event-stream body (the WHATWG server-sent events format) as events, for providers that call their
// vendor with fetch (watsonx). Comments and `id:`/`retry:` fields are skipped; multi-line `data:` is joined by "\n".

export interface SseEvent {
  /** The `event:` field; undefined for the default event type ("message"). */
  event?: string;
  data: string;
}

export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event: string | undefined;
  let data: string[] = [];
  const dispatch = (): SseEvent | undefined => {
    const out = data.length > 0 ? { ...(event !== undefined ? { event } : {}), data: data.join('\n') } : undefined;
    event = undefined;
    data = [];
    return out;
  };
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        if (line === '') {
          const ready = dispatch();
          if (ready) yield ready;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') data.push(value);
        else if (field === 'event') event = value;
      }
      // as the format says, an event the body ends in the middle of (no blank line after it) is not dispatched
      if (done) return;
    }
  } finally {
    // a consumer that stops early (or a failure) closes the connection
    await reader.cancel().catch(() => {});
  }
}
