// The fake OpenAI-compatible server in a child process, scripted over HTTP. The synchronous Hub forms block the
// calling thread, so a server in the same thread could never answer them.

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ScriptedReply } from './openai-compatible.ts';

export interface RemoteRecordedRequest {
  method: string;
  path: string;
  query: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

export class FakeOpenAIProcess {
  readonly baseURL: string;
  readonly #child: ChildProcess;

  private constructor(child: ChildProcess, baseURL: string) {
    this.#child = child;
    this.baseURL = baseURL;
  }

  /** `record: false`: the server keeps no requests (for load; `requests()` is then empty). */
  static async start(options: { record?: boolean } = {}): Promise<FakeOpenAIProcess> {
    const script = fileURLToPath(new URL('./serve-openai-compatible.ts', import.meta.url));
    const child = spawn(process.execPath, [script, ...(options.record === false ? ['--no-record'] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
    const baseURL = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (data: Buffer) => {
        out += data.toString();
        if (out.includes('\n')) resolve(out.trim());
      });
      child.once('exit', (code) => reject(new Error(`fake server exited with ${code}`)));
    });
    return new FakeOpenAIProcess(child, baseURL);
  }

  get origin(): string {
    return this.baseURL.replace(/\/v1$/, '');
  }

  async script(route: string, ...replies: ScriptedReply[]): Promise<void> {
    await fetch(`${this.origin}/__fake/script`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ route, replies }) });
  }

  async requests(): Promise<RemoteRecordedRequest[]> {
    return (await (await fetch(`${this.origin}/__fake/requests`)).json()) as RemoteRecordedRequest[];
  }

  /** The server's counters of streams and delayed replies whose client closed the connection. */
  async stats(): Promise<{ abandonedStreams: number; abandonedReplies: number }> {
    return (await (await fetch(`${this.origin}/__fake/stats`)).json()) as { abandonedStreams: number; abandonedReplies: number };
  }

  async reset(): Promise<void> {
    await fetch(`${this.origin}/__fake/reset`, { method: 'POST' });
  }

  async close(): Promise<void> {
    if (this.#child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.#child.once('exit', resolve));
    this.#child.kill('SIGTERM');
    await exited;
  }
}
