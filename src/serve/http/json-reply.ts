import { Readable } from 'node:stream';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { FastifyReply } from 'fastify';
import { jsonPieces } from '../../shared/float32-json.ts';
import { JSON_TYPE } from './errors.ts';

/**
 * Pieces of a large response, in characters: ~2 ms of writing each on this project's machine. A response of one piece
 * goes out as one string with its Content-Length.
 */
const PIECE_CHARS = 256 * 1024;

/**
 * Sends a value as JSON (stringifyJson's text: Float32Arrays as shortest float32 decimals). A large response, such as
 * one vector per token for thousands of tokens (70 MB, ~600 ms to write in one go here), is written piece by piece as
 * the connection takes it, chunked: the event loop gets a turn between pieces, so `/health` and other requests go on,
 * and the whole text is never held at once.
 */
export function sendJson(reply: FastifyReply, value: unknown): FastifyReply {
  return reply.type(JSON_TYPE).send(jsonBody(value));
}

/** sendJson's body: the JSON text when it is one piece, else a stream of its pieces. */
export function jsonBody(value: unknown): string | Readable {
  const pieces = jsonPieces(value, PIECE_CHARS);
  const first = pieces.next();
  const second = pieces.next();
  if (first.done || second.done) return first.value ?? '';
  // highWaterMark 1: the stream takes the next piece from the walk only when the connection has taken the last
  return Readable.from(restOf(first.value, second.value, pieces), { highWaterMark: 1 });
}

/**
 * The pieces, with a turn of the event loop before each one after the first two. Backpressure alone would not give
 * one: on a fast connection (loopback) a write completes at once and its 'drain' comes on the same turn's next-tick
 * queue, so the stream would take every piece in one turn.
 */
async function* restOf(first: string, second: string, rest: Iterator<string, void>): AsyncGenerator<string, void, void> {
  yield first;
  yield second;
  for (;;) {
    await yieldToEventLoop();
    const next = rest.next(); // the walk for this piece runs on the new turn
    if (next.done) return;
    yield next.value;
  }
}
