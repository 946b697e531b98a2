/**
 * A protobuf reader that holds the large strings of a message apart (encoder/large-texts.ts): a Predict request of
 * megabytes would otherwise put its texts on the event loop's heap, and their collection would hold `/health`. The
 * bytes are copied once into shared memory, where the tokenizer thread reads them; the message carries stand-ins.
 */
import protobuf from 'protobufjs';
import { LARGE_TEXT_UNITS, newStandIn, type HeldText } from '../../encoder/large-texts.ts';

export class HoldingReader extends protobuf.BufferReader {
  /** The texts held while decoding. */
  readonly held: HeldText[] = [];

  override string(): string {
    const length = this.uint32();
    const start = this.pos;
    const end = start + length;
    if (end > this.len) throw new RangeError(`index out of range: ${start} + ${length} > ${this.len}`);
    this.pos = end;
    const bytes = this.buf.subarray(start, end);
    if (length < LARGE_TEXT_UNITS) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
    const shared = new Uint8Array(new SharedArrayBuffer(length));
    shared.set(bytes);
    // a text's UTF-16 length is at most its UTF-8 length; counting exactly would read the megabytes here
    const standIn = newStandIn(length);
    this.held.push({ standIn, bytes: shared, units: length });
    return standIn;
  }
}
