import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { errorCodes } from 'fastify';
import type { BodyBudget } from './body-budget.ts';

const LARGE_BODY_BYTES = 2 ** 20;

/** Chunks smaller than this are gathered (up to this many bytes, or MAX_SMALL_CHUNKS of them) before decoding. */
const SMALL_CHUNK_BYTES = 16 * 1024;
const MAX_SMALL_CHUNKS = 256;

/**
 * Reads and parses a JSON request body, decoding each chunk as it arrives. fastify's own reader keeps the chunks,
 * joins and decodes them at the end and then parses, all in one turn of the event loop: for an 8 MiB body (the
 * default limit) that held the loop for ~100 ms on a busy machine, during which `GET /health` waited. Here only
 * JSON.parse remains one piece of work (~15 ms for 8 MiB on an idle core), and the route gets a large body on the
 * next turn. Limits and errors are fastify's: a
 * Content-Length or a body over `limit` is FST_ERR_CTP_BODY_TOO_LARGE (413), a body shorter or longer than its
 * Content-Length FST_ERR_CTP_INVALID_CONTENT_LENGTH (400), and JSON.parse's SyntaxError is rejected as is. Invalid
 * UTF-8 becomes U+FFFD, as Buffer.toString does.
 *
 * Memory: a body holds about its own size while it arrives (small chunks are decoded together, so a client sending
 * a byte at a time does not cost tens of bytes per byte), and with a `budget` every byte received counts against
 * the server-wide limit until the body is parsed or fails; a body that would pass it is refused with a 503.
 */
export function readJsonBody(
  payload: Readable & { receivedEncodedLength?: number },
  contentLength: string | undefined,
  limit: number,
  budget?: BodyBudget,
  parseLarge?: (bytes: Uint8Array) => Promise<unknown>,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const declared = Number(contentLength);
    if (declared > limit) {
      payload.resume();
      reject(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      return;
    }
    const decoder = new StringDecoder('utf8');
    let text = '';
    // A large body announced by its Content-Length, with somewhere to parse it off the event loop: its bytes are
    // copied as they arrive into a buffer of its own (a large Buffer never shares the pool's), to be handed over.
    // Joining 8 MiB of chunks at the end held the event loop ~30 ms on a busy machine.
    const kept: Buffer | null = parseLarge && declared > LARGE_BODY_BYTES ? Buffer.allocUnsafeSlow(declared) : null;
    let received = 0;
    // Small chunks (a slow client's) wait here and are decoded together: one string piece per chunk would hold
    // tens of bytes of bookkeeping for every byte received.
    let small: Buffer[] = [];
    let smallBytes = 0;
    const flush = () => {
      if (small.length === 0) return;
      if (kept) {
        for (const chunk of small) keep(chunk);
      } else text += decoder.write(small.length === 1 ? small[0] : Buffer.concat(small, smallBytes));
      small = [];
      smallBytes = 0;
    };
    let keptBytes = 0;
    const keep = (chunk: Buffer) => {
      keptBytes += chunk.copy(kept!, keptBytes);
    };
    const stop = () => {
      payload.off('data', onData);
      payload.off('end', onEnd);
      payload.off('error', onError);
      payload.off('close', onClose);
      budget?.give(received);
    };
    const fail = (error: Error) => {
      stop();
      text = '';
      small = [];
      reject(error);
    };
    const onData = (chunk: Buffer | string) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      if (received + bytes.length > limit || (payload.receivedEncodedLength ?? 0) > limit) {
        fail(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
        return;
      }
      if (budget && !budget.take(bytes.length)) {
        // read no more of it: what the client still sends stays in its socket until the 503 closes the connection
        payload.pause();
        fail(budget.refusal());
        return;
      }
      received += bytes.length;
      if (bytes.length >= SMALL_CHUNK_BYTES) {
        flush();
        if (kept) keep(bytes);
        else text += decoder.write(bytes);
        return;
      }
      small.push(bytes);
      smallBytes += bytes.length;
      if (smallBytes >= SMALL_CHUNK_BYTES || small.length >= MAX_SMALL_CHUNKS) flush();
    };
    const onEnd = () => {
      flush();
      stop();
      if (!Number.isNaN(declared) && (payload.receivedEncodedLength || received) !== declared) {
        reject(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
        return;
      }
      if (kept) {
        parseLarge!(new Uint8Array(kept.buffer, kept.byteOffset, keptBytes)).then(resolve, reject);
        return;
      }
      let value: unknown;
      try {
        value = JSON.parse(text + decoder.end());
      } catch (error) {
        reject(error as Error);
        return;
      }
      // what the route does with a large body (validation, tokenizing) waits for the next turn, not this one's end
      if (received > LARGE_BODY_BYTES) setImmediate(() => resolve(value));
      else resolve(value);
    };
    const onError = (error: Error & { statusCode?: number }) => {
      if (!(typeof error.statusCode === 'number' && error.statusCode >= 400)) error.statusCode = 400;
      fail(error);
    };
    // the connection went away without an error event: what was held goes back to the budget all the same
    const onClose = () => fail(Object.assign(new Error('the request body ended before it was complete'), { statusCode: 400 }));
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.on('close', onClose);
    payload.resume();
  });
}
