import { Readable } from 'node:stream';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { FastifyReply } from 'fastify';
import { resolveHeldTexts } from '../../encoder/large-texts.ts';
import { jsonPieces } from '../../shared/float32-json.ts';
import { JSON_TYPE } from './errors.ts';

/** Pieces of a large response, in characters: ~4 ms of writing each on this project's machine. */
const PIECE_CHARS = 512 * 1024;

/**
 * A response of up to this many pieces (4 MiB, ~35 ms of writing here) goes out whole, as one string with its
 * Content-Length. Sent in pieces, chunked, a response costs more: with 8 concurrent requests for per-token embeddings
 * of ~1.5 MB, 0.86x the requests per second (client and server on this machine's two cores); and a response
 * of a few pieces would free only a few turns. Larger ones are rare and would hold the event loop for long.
 */
const WHOLE_PIECES = 8;

/**
 * Sends a value as JSON (stringifyJson's text: Float32Arrays as shortest float32 decimals). A large response, such as
 * one vector per token for thousands of tokens (70 MB, ~600 ms to write in one go here), is written piece by piece,
 * chunked, with a turn of the event loop between pieces, so `/health` and other requests go on, and the whole text
 * is never held at once.
 */
export function sendJson(reply: FastifyReply, value: unknown): FastifyReply {
  return reply.type(JSON_TYPE).send(jsonBody(value));
}

/** sendJson's body: the JSON text when it is at most WHOLE_PIECES pieces, else a stream of its pieces. */
export function jsonBody(value: unknown): string | Readable {
  const pieces = jsonPieces(resolveHeldTexts(value), PIECE_CHARS);
  const first: string[] = [];
  for (let next = pieces.next(); !next.done; next = pieces.next()) {
    first.push(next.value);
    if (first.length > WHOLE_PIECES) return Readable.from(restOf(first, pieces), { highWaterMark: 1 });
  }
  return first.join('');
}

/**
 * The pieces as bytes (the connection would otherwise measure each string for its chunk header, then encode it), with
 * a turn of the event loop before each one after those already written. Backpressure alone would not give one: on a
 * fast connection (loopback) a write completes at once and its 'drain' comes on the same turn's next-tick queue, so
 * the stream would take every piece in one turn.
 */
async function* restOf(first: string[], rest: Iterator<string, void>): AsyncGenerator<Buffer, void, void> {
  yield Buffer.from(first.join(''));
  for (;;) {
    await yieldToEventLoop();
    const next = rest.next(); // the walk for this piece runs on the new turn
    if (next.done) return;
    yield Buffer.from(next.value);
  }
}
