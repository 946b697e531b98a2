/**
 * Large texts held outside the main thread's JavaScript heap. A request of megabytes used to put its texts on the
 * event loop's heap twice (the parsed body, then the copy for the tokenizer thread), and the garbage collections
 * those strings brought on held `/health` for 40–130 ms at a time (docs/benchmarks.md, "Hostile inputs"). Now a
 * string of at least LARGE_TEXT_UNITS UTF-16 units that arrives in a large body (parsed on a tokenizer thread) or a
 * gRPC message is kept as UTF-8 bytes in a SharedArrayBuffer, and the request carries a short stand-in string in its
 * place. Front ends validate and pass stand-ins like any string; the tokenizer thread reads the bytes (shared, not
 * copied); code on the main thread that needs the text itself calls textOf, and answers that echo a request's texts
 * are resolved by resolveHeldTexts before they are written.
 *
 * A stand-in is unguessable (a random UUID), so a client cannot name another request's text. Its bytes live as long
 * as the object they arrived in (the parsed body, the decoded message) is reachable: that object keeps its entries
 * (a WeakMap) and the registry only holds them weakly.
 */
import { randomUUID } from 'node:crypto';

/** Strings at least this long (UTF-16 units) are held as bytes: ~64 KiB, far above a query, far below a hostile input. */
export const LARGE_TEXT_UNITS = 2 ** 16;

/** A text held as UTF-8 bytes; `standIn` is what the request carries instead. */
export interface HeldText {
  readonly standIn: string;
  /** UTF-8, in a SharedArrayBuffer (the tokenizer thread reads it without a copy). */
  readonly bytes: Uint8Array;
  /** The text's length in UTF-16 units (String.prototype.length). */
  readonly units: number;
}

/** The held texts that arrived in each object (a parsed body, a decoded message), kept alive with it. */
const owners = new WeakMap<object, HeldText[]>();

const registry = new Map<string, WeakRef<HeldText>>();
const forget = new FinalizationRegistry<string>((standIn) => {
  const ref = registry.get(standIn);
  if (ref !== undefined && ref.deref() === undefined) registry.delete(standIn);
});

/** A stand-in for a text of `units`: it says what it stands for, in case it shows in a message. */
export function newStandIn(units: number): string {
  return `\uFDD0[a text of ${units} UTF-16 units, held apart: ${randomUUID()}]\uFDD1`;
}

/** `text` as UTF-8 bytes in shared memory. */
export function sharedUtf8(text: string): Uint8Array {
  const bytes = new Uint8Array(new SharedArrayBuffer(Buffer.byteLength(text, 'utf8')));
  Buffer.from(bytes.buffer, 0, bytes.byteLength).write(text, 'utf8');
  return bytes;
}

/** The text of UTF-8 bytes (shared or not); invalid UTF-8 becomes U+FFFD. */
export function utf8Text(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}

/** Registers `texts` as arriving in `owner` (an object or array), which keeps them alive. */
export function adoptHeldTexts(owner: object, texts: readonly HeldText[]): void {
  if (texts.length === 0) return;
  let kept = owners.get(owner);
  if (kept === undefined) owners.set(owner, (kept = []));
  for (const text of texts) {
    kept.push(text);
    registry.set(text.standIn, new WeakRef(text));
    forget.register(text, text.standIn);
  }
}

/** The held text `text` stands for, if it is a stand-in. */
export function heldText(text: string): HeldText | undefined {
  if (registry.size === 0 || text.charCodeAt(0) !== 0xfdd0) return undefined;
  return registry.get(text)?.deref();
}

/** What `text` stands for: the held text read back (a copy on this thread's heap), or `text` itself. */
export function textOf(text: string): string {
  const held = heldText(text);
  return held === undefined ? text : utf8Text(held.bytes);
}

/** The UTF-16 length of what `text` stands for. */
export function unitsOfText(text: string): number {
  return heldText(text)?.units ?? text.length;
}

/** Whether any text is held now (a cheap test before walking an answer). */
export function holdingTexts(): boolean {
  return registry.size > 0;
}

/**
 * `value` with every stand-in in it (as a string value, at any depth) replaced by its text, for answers that echo a
 * request's texts; the same value when it holds none. Typed arrays are not walked.
 */
export function resolveHeldTexts<T>(value: T): T {
  if (!holdingTexts()) return value;
  return resolve(value, 0) as T;
}

function resolve(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return textOf(value);
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value) || depth > 64) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | null = null;
    for (let index = 0; index < value.length; index++) {
      const resolved = resolve(value[index], depth + 1);
      if (resolved !== value[index]) (copy ??= [...value])[index] = resolved;
    }
    return copy ?? value;
  }
  let copy: Record<string, unknown> | null = null;
  for (const [key, item] of Object.entries(value)) {
    const resolved = resolve(item, depth + 1);
    if (resolved !== item) (copy ??= { ...value })[key] = resolved;
  }
  return copy ?? value;
}

/**
 * Replaces, in a freshly parsed JSON value, every string of at least `minUnits` units by a stand-in, and answers the
 * texts it now holds (for the thread that parsed it to send over; adoptHeldTexts registers them on arrival).
 * Iterative: a body's depth is bounded by its size only.
 */
export function holdLargeStrings(value: unknown, minUnits = LARGE_TEXT_UNITS): HeldText[] {
  const held: HeldText[] = [];
  const hold = (text: string): string => {
    const standIn = newStandIn(text.length);
    held.push({ standIn, bytes: sharedUtf8(text), units: text.length });
    return standIn;
  };
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (item === null || typeof item !== 'object') continue;
    const entries = item as Record<string, unknown>;
    for (const key of Object.keys(entries)) {
      const child = entries[key];
      if (typeof child === 'string') {
        if (child.length >= minUnits) entries[key] = hold(child);
      } else if (child !== null && typeof child === 'object') stack.push(child);
    }
  }
  return held;
}

const STAND_IN = /\uFDD0\[a text of \d+ UTF-16 units, held apart: [0-9a-f-]{36}\]\uFDD1/g;

/**
 * A JSON text with each stand-in in it replaced by its text (escaped as in a JSON string): for answers written
 * before they reach the socket, messages that quote a request's value included. JSON.stringify leaves U+FDD0 as it is.
 */
export function resolveHeldTextsInJson(json: string): string {
  if (!holdingTexts() || !json.includes('\uFDD0')) return json;
  return json.replace(STAND_IN, (standIn) => {
    const held = heldText(standIn);
    return held === undefined ? standIn : JSON.stringify(utf8Text(held.bytes)).slice(1, -1);
  });
}
