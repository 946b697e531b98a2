import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { errorCodes } from 'fastify';

const LARGE_BODY_BYTES = 2 ** 20;

/**
 * Reads and parses a JSON request body, decoding each chunk as it arrives. fastify's own reader keeps the chunks,
 * joins and decodes them at the end and then parses, all in one turn of the event loop: for an 8 MiB body (the
 * default limit) that held the loop for ~100 ms on a busy machine, during which `GET /health` waited. Here only
 * JSON.parse remains one piece of work (~15 ms for 8 MiB on an idle core), and the route gets a large body on the
 * next turn. Limits and errors are fastify's: a
 * Content-Length or a body over `limit` is FST_ERR_CTP_BODY_TOO_LARGE (413), a body shorter or longer than its
 * Content-Length FST_ERR_CTP_INVALID_CONTENT_LENGTH (400), and JSON.parse's SyntaxError is rejected as is. Invalid
 * UTF-8 becomes U+FFFD, as Buffer.toString does.
 */
export function readJsonBody(payload: Readable & { receivedEncodedLength?: number }, contentLength: string | undefined, limit: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const declared = Number(contentLength);
    if (declared > limit) {
      payload.resume();
      reject(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      return;
    }
    const decoder = new StringDecoder('utf8');
    let text = '';
    let received = 0;
    const stop = () => {
      payload.off('data', onData);
      payload.off('end', onEnd);
      payload.off('error', onError);
    };
    const onData = (chunk: Buffer | string) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      received += bytes.length;
      if (received > limit || (payload.receivedEncodedLength ?? 0) > limit) {
        stop();
        reject(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
        return;
      }
      text += decoder.write(bytes);
    };
    const onEnd = () => {
      stop();
      if (!Number.isNaN(declared) && (payload.receivedEncodedLength || received) !== declared) {
        reject(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
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
      stop();
      if (!(typeof error.statusCode === 'number' && error.statusCode >= 400)) error.statusCode = 400;
      reject(error);
    };
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.resume();
  });
}
