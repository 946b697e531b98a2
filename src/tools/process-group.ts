import { spawn, type ChildProcess } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** How long `close` waits after closing stdin, then after SIGTERM, before the next step (as the SDK's stdio transport). */
const GRACE_MS = 2000;

/** The process groups of the stdio servers running now (leader pid = group id); `onChange` hears of each change. */
export const processGroups = {
  live: new Set<number>(),
  listeners: new Set<() => void>(),
  changed(): void {
    for (const listener of this.listeners) listener();
  },
  /** SIGKILL to every live group: for exits that cannot wait (the 'exit' event, an uncaught error). */
  killAll(): void {
    for (const pgid of this.live) killGroup(pgid, 'SIGKILL');
  },
};

let exitHookInstalled = false;
/** Once a group runs: whatever way the process ends (normal exit, a fatal error), its groups end with it. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => processGroups.killAll());
}

export function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // gone already
  }
}

export interface ProcessGroupParameters {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
}

/**
 * The MCP SDK's stdio client transport, but with the server in a process group of its own (Linux and macOS): a
 * server started through a wrapper (npx, a shell script) ends with all of its processes, a Ctrl+C in the terminal
 * reaches only the tool server (which then closes its servers in order), and `processGroups` lets every exit path
 * end them. The SDK's own transport spawns without `detached` and offers no option for it; the JSON-RPC framing
 * (ReadBuffer, serializeMessage, its 10 MiB line limit) and the environment (getDefaultEnvironment) are the SDK's.
 */
export class ProcessGroupTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** The server's stderr. */
  readonly stderr = new PassThrough();
  readonly #parameters: ProcessGroupParameters;
  readonly #buffer = new ReadBuffer();
  #child: ChildProcess | undefined;
  #pid: number | undefined;

  constructor(parameters: ProcessGroupParameters) {
    this.#parameters = parameters;
  }

  get pid(): number | undefined {
    return this.#pid;
  }

  start(): Promise<void> {
    if (this.#child) throw new Error('ProcessGroupTransport already started');
    installExitHook();
    const { command, args, env, cwd } = this.#parameters;
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, { env: { ...getDefaultEnvironment(), ...env }, cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
      this.#child = child;
      child.on('error', (error) => {
        reject(error);
        this.onerror?.(error);
      });
      child.on('spawn', () => {
        this.#pid = child.pid;
        processGroups.live.add(child.pid!);
        processGroups.changed();
        resolve();
      });
      child.on('close', () => {
        this.#child = undefined;
        // what the server started in its group goes with it
        if (this.#pid !== undefined) this.#endGroup(this.#pid);
        this.onclose?.();
      });
      child.stdin!.on('error', (error) => this.onerror?.(error));
      child.stdout!.on('error', (error) => this.onerror?.(error));
      child.stdout!.on('data', (chunk: Buffer) => {
        try {
          this.#buffer.append(chunk);
        } catch (error) {
          this.onerror?.(error as Error);
          void this.close();
          return;
        }
        for (;;) {
          try {
            const message = this.#buffer.readMessage();
            if (message === null) break;
            this.onmessage?.(message);
          } catch (error) {
            this.onerror?.(error as Error);
          }
        }
      });
      child.stderr!.pipe(this.stderr);
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.#child?.stdin;
      if (!stdin) return reject(new Error('Not connected'));
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }

  /** stdin closed, then SIGTERM to the group, then SIGKILL, each after a grace period the server did not use to exit. */
  async close(): Promise<void> {
    const child = this.#child;
    this.#buffer.clear();
    if (!child || this.#pid === undefined) return;
    this.#child = undefined;
    const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
    const exited = () => child.exitCode !== null || child.signalCode !== null;
    const grace = () => Promise.race([closed, new Promise((resolve) => setTimeout(resolve, GRACE_MS).unref())]);
    child.stdin?.end();
    await grace();
    if (!exited()) {
      killGroup(this.#pid, 'SIGTERM');
      await grace();
    }
    this.#endGroup(this.#pid);
  }

  #endGroup(pgid: number): void {
    killGroup(pgid, 'SIGKILL');
    if (processGroups.live.delete(pgid)) processGroups.changed();
  }
}
