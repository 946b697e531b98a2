import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { ToolsConfigError } from './config.ts';
import { killGroup, processGroups } from './process-group.ts';

/** What identifies a process beyond its pid (which the system reuses): when it started, and its command line. */
interface Identity {
  startTime: string;
  command: string;
}

interface Recorded extends Identity {
  pid: number;
}

interface RecordFile {
  owner: Recorded;
  children: Recorded[];
}

/** The state folder: ENCODER_TOOLS_STATE_DIR, else $XDG_STATE_HOME/encoder, else ~/.local/state/encoder. */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.ENCODER_TOOLS_STATE_DIR) return env.ENCODER_TOOLS_STATE_DIR;
  return path.join(env.XDG_STATE_HOME || path.join(homedir(), '.local', 'state'), 'encoder');
}

/**
 * The stdio servers (process groups) a tool server runs, recorded in a file of the state folder named after its
 * configuration file, so that the next start with that configuration can end those a SIGKILLed run left behind.
 * A recorded process is ended only when its start time and command line are still those recorded: a pid the system
 * has given to an unrelated process since is left alone.
 */
export class ChildRecords {
  readonly file: string;
  readonly #log: (line: string) => void;
  #stop: (() => void) | undefined;

  constructor(stateDir: string, configFile: string, log: (line: string) => void) {
    const id = createHash('sha256').update(path.resolve(configFile)).digest('hex').slice(0, 16);
    this.file = path.join(stateDir, `tools-children-${id}.json`);
    this.#log = log;
  }

  /**
   * Ends the process groups of a previous run of this configuration that are still running (SIGTERM, then SIGKILL
   * after a second). Refuses (ToolsConfigError) while that run itself is still running.
   */
  async sweep(): Promise<number> {
    let recorded: RecordFile;
    try {
      recorded = JSON.parse(readFileSync(this.file, 'utf8')) as RecordFile;
    } catch {
      return 0; // no previous run, or it ended cleanly (the file is removed then)
    }
    if (recorded.owner.pid !== process.pid && sameProcess(recorded.owner)) {
      throw new ToolsConfigError(`another tool server (pid ${recorded.owner.pid}) runs with this configuration and state folder (${this.file})`);
    }
    const orphans = recorded.children.filter((child) => {
      if (sameProcess(child)) return true;
      if (identityOf(child.pid)) this.#log(`pid ${child.pid} of a previous run now belongs to another process: left alone`);
      return false;
    });
    for (const child of orphans) {
      this.#log(`ending pid ${child.pid} (${child.command}), a server left running by a previous run that did not stop cleanly`);
      killGroup(child.pid, 'SIGTERM');
    }
    const deadline = Date.now() + 1000;
    while (orphans.some(sameProcess) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    for (const child of orphans) if (sameProcess(child)) killGroup(child.pid, 'SIGKILL');
    rmSync(this.file, { force: true });
    return orphans.length;
  }

  /** Keeps the file up to date with the running process groups until `stop`, which removes it. */
  track(): void {
    const owner = identityOf(process.pid);
    if (!owner) return; // no way to tell processes apart here (no /proc, no ps): nothing safe to record
    const known = new Map<number, Recorded>();
    const write = () => {
      for (const pid of processGroups.live) {
        if (known.has(pid)) continue;
        const identity = identityOf(pid);
        if (identity) known.set(pid, { pid, ...identity });
      }
      for (const pid of known.keys()) if (!processGroups.live.has(pid)) known.delete(pid);
      const content: RecordFile = { owner: { pid: process.pid, ...owner }, children: [...known.values()] };
      try {
        mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
        writeFileSync(`${this.file}.tmp`, `${JSON.stringify(content)}\n`, { mode: 0o600 });
        renameSync(`${this.file}.tmp`, this.file);
      } catch (error) {
        this.#log(`cannot record the servers' process ids in ${this.file}: ${(error as Error).message}`);
      }
    };
    processGroups.listeners.add(write);
    write();
    this.#stop = () => {
      processGroups.listeners.delete(write);
      rmSync(this.file, { force: true });
    };
  }

  stop(): void {
    this.#stop?.();
    this.#stop = undefined;
  }
}

function sameProcess(recorded: Recorded): boolean {
  const now = identityOf(recorded.pid);
  return now !== undefined && now.startTime === recorded.startTime && now.command === recorded.command;
}

/** Start time and command line: from /proc on Linux (start time in clock ticks since boot), else from ps. */
function identityOf(pid: number): Identity | undefined {
  if (process.platform === 'linux') {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // the command name (field 2) is in parentheses and may hold spaces or ")": count fields after the last ")"
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // a zombie has ended (it has no command line left); where no init reaps orphans it stays one for good
      if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
      const startTime = fields[19];
      const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      return { startTime, command };
    } catch {
      return undefined;
    }
  }
  if (process.platform === 'win32') return undefined;
  try {
    const startTime = execFileSync('ps', ['-o', 'lstart=', '-p', String(pid)], { encoding: 'utf8' }).trim();
    const command = execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' }).trim();
    return startTime ? { startTime, command } : undefined;
  } catch {
    return undefined;
  }
}
