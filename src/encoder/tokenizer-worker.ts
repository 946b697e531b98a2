/**
 * The tokenizer thread: tokenizes the texts of large requests so that the event loop which answers /health and the
 * other requests never waits for them. It runs the inference worker's script (onnx-worker.ts) started with the role
 * `tokenizer`, so that the single executable carries one worker bundle; it never loads onnxruntime.
 */
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import type { MessagePort } from 'node:worker_threads';
import { parseJsonBytes } from '../shared/json-bytes.ts';
import { releaseMemorySoon } from '../shared/release-memory.ts';
import { errorMessageOf, type ErrorMessage } from './errors.ts';
import { holdLargeStrings, utf8Text, type HeldText } from './large-texts.ts';
import { EncoderTokenizer, type Encoding, type TextTruncation } from './tokenizer/index.ts';
import { packEncodings, transferablesOf, type PackedEncodings } from './tokenizer/packed-encodings.ts';
import { LARGE_WORK_UNITS, unitsOf } from './work-size.ts';

export interface TokenizerSource {
  tokenizerJson: unknown;
  tokenizerConfig: unknown | null;
  /** The length the model runs (model-package.ts maxLength), when known. */
  maxLength?: number;
  /** How texts are cut (model-package.ts truncation); absent: right, longest_first, stride 0. */
  truncation?: TextTruncation;
}

/** A text, or a held text's UTF-8 bytes (large-texts.ts; shared memory, read here without a copy). */
export type TextSource = string | Uint8Array;

export type TokenizerRequest =
  | { kind: 'load'; source: TokenizerSource }
  /** `texts[i]` alone, or the pair (texts[i], pairs[i]) where that is a text; `tokens`: pack the token strings too. */
  | { kind: 'encode'; id: number; texts: TextSource[]; pairs: (TextSource | null)[] | null; tokens: boolean }
  /**
   * A large request body's bytes (UTF-8 JSON), parsed here so that the event loop does not (JSON.parse of MiBs); its
   * large strings are held apart (large-texts.ts) and the value carries stand-ins.
   */
  | { kind: 'parse'; id: number; bytes: Uint8Array }
  | { kind: 'close' };

export type TokenizerReply =
  | { kind: 'loaded' }
  | { kind: 'encoded'; id: number; packed: PackedEncodings }
  | { kind: 'parsed'; id: number; value: unknown; held: HeldText[] }
  /** JSON.parse's SyntaxError message. */
  | { kind: 'unparsable'; id: number; message: string }
  | { kind: 'failed'; id: number | null; error: ErrorMessage }
  | { kind: 'closed' };

/** What role a thread started from the worker script plays; absent: inference. */
export interface WorkerRoleData {
  /** The tokenizer thread (tokenizer-workers.ts) or an image thread (image-workers.ts); absent: an inference worker. */
  role?: 'tokenizer' | 'image';
}

/** A held text's bytes read as text; anything else goes to the tokenizer as it came (which refuses a non-text). */
const textFrom = (source: TextSource): string => (source instanceof Uint8Array ? utf8Text(source) : source);

/**
 * A tokenizer thread's work is large requests': it runs below the event loop, which answers /health and the short
 * requests, so that on a busy machine the loop gets a core first. On Linux a thread's nice value is its own.
 */
function lowerThreadPriority(): void {
  if (process.platform !== 'linux') return;
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid !== process.pid) setPriority(tid, THREAD_NICE);
  } catch {
    // without /proc or the right to change it, the thread runs at the process's priority
  }
}

/** Nice value of a tokenizer thread: below the loop, still ahead of a batch job at 19. */
const THREAD_NICE = 10;

/** Answers the requests of TokenizerWorkers (tokenizer-workers.ts) on `port`. */
export function serveTokenizer(port: MessagePort): void {
  lowerThreadPriority();
  let tokenizer: EncoderTokenizer | undefined;
  port.on('message', (request: TokenizerRequest) => {
    switch (request.kind) {
      case 'load':
        try {
          tokenizer = EncoderTokenizer.fromJson(request.source.tokenizerJson, request.source.tokenizerConfig, { maxLength: request.source.maxLength, truncation: request.source.truncation });
          port.postMessage({ kind: 'loaded' } satisfies TokenizerReply);
        } catch (error) {
          port.postMessage({ kind: 'failed', id: null, error: errorMessageOf(error) } satisfies TokenizerReply);
        }
        return;
      case 'encode':
        try {
          const texts = request.texts.map(textFrom);
          const pairs = request.pairs?.map((pair) => (pair === null ? null : textFrom(pair))) ?? [];
          const encodings: Encoding[] = texts.map((text, index) => {
            const pair = pairs[index];
            return typeof pair === 'string' ? tokenizer!.encodePair(text, pair) : tokenizer!.encode(text);
          });
          const packed = packEncodings(encodings, request.tokens);
          port.postMessage({ kind: 'encoded', id: request.id, packed } satisfies TokenizerReply, transferablesOf(packed));
          if (unitsOf(texts) + unitsOf(pairs) > LARGE_WORK_UNITS) releaseMemorySoon();
        } catch (error) {
          port.postMessage({ kind: 'failed', id: request.id, error: errorMessageOf(error) } satisfies TokenizerReply);
        }
        return;
      case 'parse': {
        let value: unknown;
        try {
          value = parseJsonBytes(request.bytes);
        } catch (error) {
          port.postMessage({ kind: 'unparsable', id: request.id, message: (error as Error).message } satisfies TokenizerReply);
          return;
        }
        // only an object can keep its held texts alive (large-texts.ts); a bare string body is refused by every route
        const held = value !== null && typeof value === 'object' ? holdLargeStrings(value) : [];
        port.postMessage({ kind: 'parsed', id: request.id, value, held } satisfies TokenizerReply);
        if (request.bytes.byteLength > LARGE_WORK_UNITS) releaseMemorySoon();
        return;
      }
      case 'close':
        tokenizer = undefined;
        port.postMessage({ kind: 'closed' } satisfies TokenizerReply);
        return;
    }
  });
}
