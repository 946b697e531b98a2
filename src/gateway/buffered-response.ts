import type { IncomingHttpHeaders } from 'node:http';

/**
 * A response's headers as node:http parsed them (names lower-case): Headers' reading methods over that object, instead
 * of copying and validating every header into a new Headers on each answer. Read-only, as a Response's headers are;
 * `new Headers(these)` copies them (through the iterator). Not `instanceof Headers`: nothing that reads the SDKs'
 * answers asks.
 */
export class ParsedHeaders {
  readonly #raw: IncomingHttpHeaders;

  constructor(raw: IncomingHttpHeaders) {
    this.#raw = raw;
  }

  get(name: string): string | null {
    const value = this.#raw[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(', ') : value;
  }

  has(name: string): boolean {
    return this.#raw[name.toLowerCase()] !== undefined;
  }

  getSetCookie(): string[] {
    const cookies = this.#raw['set-cookie'];
    return cookies === undefined ? [] : [...cookies];
  }

  /** In name order, set-cookie once per cookie, as Headers iterates. */
  #pairs(): [string, string][] {
    const pairs: [string, string][] = [];
    for (const name of Object.keys(this.#raw).sort()) {
      if (name === 'set-cookie') for (const cookie of this.getSetCookie()) pairs.push([name, cookie]);
      else if (this.#raw[name] !== undefined) pairs.push([name, this.get(name)!]);
    }
    return pairs;
  }

  entries(): IterableIterator<[string, string]> {
    return this.#pairs().values();
  }

  keys(): IterableIterator<string> {
    return this.#pairs().map(([name]) => name).values();
  }

  values(): IterableIterator<string> {
    return this.#pairs().map(([, value]) => value).values();
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }

  forEach(callback: (value: string, name: string, headers: ParsedHeaders) => void, thisArg?: unknown): void {
    for (const [name, value] of this.#pairs()) callback.call(thisArg, value, name, this);
  }
}

/**
 * An answer node:http has read whole (the small JSON answers that make up most calls): status, headers, text() and
 * json() straight from the bytes. Building a web Response (a copy of the body, a stream around it, a validated
 * Headers) for each was ~15% of the gateway's CPU per call (docs/benchmarks.md, "Session 13"). Everything else a
 * Response offers (body, blob(), formData(), …) comes from a real one, made on first use.
 */
export class BufferedResponse {
  readonly ok: boolean;
  readonly status: number;
  readonly statusText: string;
  readonly url: string;
  readonly redirected = false;
  readonly type = 'basic';
  readonly headers: ParsedHeaders;
  readonly #rawHeaders: IncomingHttpHeaders;
  readonly #bytes: Buffer;
  #used = false;
  #response: Response | undefined;

  constructor(bytes: Buffer, status: number, statusText: string, headers: IncomingHttpHeaders, url: string) {
    this.#bytes = bytes;
    this.status = status;
    this.statusText = statusText;
    this.url = url;
    this.ok = status >= 200 && status <= 299;
    this.#rawHeaders = headers;
    this.headers = new ParsedHeaders(headers);
  }

  /** The same answer as a web Response (its body not yet read), for what this class does not offer itself. */
  #asResponse(): Response {
    this.#response ??= new Response(this.#used ? null : this.#bytes, { status: this.status, statusText: this.statusText, headers: [...this.headers] });
    return this.#response;
  }

  get bodyUsed(): boolean {
    return this.#used || (this.#response?.bodyUsed ?? false);
  }

  get body(): ReadableStream<Uint8Array> | null {
    return this.#asResponse().body;
  }

  /** The body as text, once: UTF-8 without a byte order mark, as Response.text() decodes it. */
  #takeText(): string {
    if (this.#used) throw new TypeError('Body is unusable: Body has already been read');
    this.#used = true;
    const bytes = this.#bytes;
    const bom = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
    return (bom ? bytes.subarray(3) : bytes).toString('utf8');
  }

  async text(): Promise<string> {
    return this.#response ? this.#response.text() : this.#takeText();
  }

  async json(): Promise<unknown> {
    return this.#response ? this.#response.json() : (JSON.parse(this.#takeText()) as unknown);
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    return this.#asResponse().arrayBuffer();
  }

  async bytes(): Promise<Uint8Array> {
    return this.#asResponse().bytes();
  }

  async blob(): Promise<Blob> {
    return this.#asResponse().blob();
  }

  async formData(): Promise<FormData> {
    return this.#asResponse().formData();
  }

  clone(): BufferedResponse {
    if (this.bodyUsed) throw new TypeError('Response.clone: Body has already been consumed.');
    return new BufferedResponse(this.#bytes, this.status, this.statusText, this.#rawHeaders, this.url);
  }
}
