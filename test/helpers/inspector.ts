/**
 * A DevTools-protocol session with a process started with `NODE_OPTIONS=--inspect=127.0.0.1:0` (the single
 * executable honours NODE_OPTIONS), for what only tests do to a running server: force a full garbage collection in
 * its main thread and every worker thread, so that its resident memory can be read without the garbage of the moment.
 * No product code is involved and nothing is listening except on loopback.
 */

/** The inspector's WebSocket address, from the line Node prints on stderr when it starts with --inspect. */
export function inspectorUrlOf(stderr: string): string {
  const url = /Debugger listening on (ws:\/\/\S+)/.exec(stderr)?.[1];
  if (!url) throw new Error(`no inspector address in the process's stderr (was it started with --inspect?):\n${stderr}`);
  return url;
}

type Message = { id?: number; method?: string; params?: Record<string, unknown>; result?: unknown; error?: { message: string } };

export class InspectorSession {
  readonly #socket: WebSocket;
  readonly #pending = new Map<string, { resolve: (result: unknown) => void; reject: (error: Error) => void }>();
  /** Sessions of the worker threads that exist (NodeWorker domain). */
  readonly #workers = new Set<string>();
  #nextId = 1;

  private constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.addEventListener('message', (event) => this.#receive(JSON.parse(String(event.data)) as Message));
    socket.addEventListener('close', () => {
      for (const { reject } of this.#pending.values()) reject(new Error('inspector connection closed'));
      this.#pending.clear();
    });
  }

  static async connect(url: string): Promise<InspectorSession> {
    const socket = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener('open', () => resolve(), { once: true });
      socket.addEventListener('error', () => reject(new Error(`cannot connect to the inspector at ${url}`)), { once: true });
    });
    const session = new InspectorSession(socket);
    // Attaches to the worker threads running now and to those started later (attachedToWorker events).
    await session.#send(null, 'NodeWorker.enable', { waitForDebuggerOnStart: false });
    return session;
  }

  /** A full collection (V8's "all available garbage", which also gives freed pages back) in every thread. */
  async collectGarbage(): Promise<void> {
    await Promise.all([null, ...this.#workers].map((worker) => this.#send(worker, 'HeapProfiler.collectGarbage')));
  }

  /** The number of worker threads attached, to check that the collection reached them. */
  get workerCount(): number {
    return this.#workers.size;
  }

  close(): void {
    this.#socket.close();
  }

  /** A command to the main thread (`worker` null) or to a worker's session, wrapped as the NodeWorker domain wants. */
  #send(worker: string | null, method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.#nextId++;
    const message = JSON.stringify({ id, method, params });
    return new Promise((resolve, reject) => {
      this.#pending.set(`${worker ?? ''}:${id}`, { resolve, reject });
      if (worker === null) this.#socket.send(message);
      else this.#socket.send(JSON.stringify({ id: this.#nextId++, method: 'NodeWorker.sendMessageToWorker', params: { sessionId: worker, message } }));
    });
  }

  #receive(message: Message, worker: string | null = null): void {
    if (message.method === 'NodeWorker.attachedToWorker') this.#workers.add(String(message.params!.sessionId));
    else if (message.method === 'NodeWorker.detachedFromWorker') this.#workers.delete(String(message.params!.sessionId));
    else if (message.method === 'NodeWorker.receivedMessageFromWorker') {
      this.#receive(JSON.parse(String(message.params!.message)) as Message, String(message.params!.sessionId));
    } else if (message.id !== undefined) {
      // Answers to the NodeWorker.sendMessageToWorker wrappers themselves are not awaited.
      const pending = this.#pending.get(`${worker ?? ''}:${message.id}`);
      if (!pending) return;
      this.#pending.delete(`${worker ?? ''}:${message.id}`);
      if (message.error) pending.reject(new Error(`inspector: ${message.error.message}`));
      else pending.resolve(message.result);
    }
  }
}
