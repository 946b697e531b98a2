/**
 * `serve` re-executes itself once with glibc's malloc mmap threshold fixed (src/shared/malloc-tuning.ts), so that the
 * megabytes of hostile requests go back to the system (test/serve/hostile-input.test.ts measures the memory). It is
 * the same process (execve), from source as from the single executable; a threshold the user set is kept; `mcp`
 * (serve with HTTP only) is re-executed too, other commands are not.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { isGlibc, MMAP_THRESHOLD_BYTES, reexecWithMallocTuning } from '../../src/shared/malloc-tuning.ts';
import { baseRuntimePath, hasBaseRuntime, startListening } from '../helpers/executables.ts';
import { generateTinyModel } from '../helpers/generated-models.ts';
import { repoRoot } from '../helpers/shared-fixtures.ts';

const glibc = process.platform === 'linux' && isGlibc();
const work = mkdtempSync(path.join(os.tmpdir(), 'serve-malloc-'));
let config: string;

beforeAll(async () => {
  const dir = await generateTinyModel({ modelType: 'embedding' });
  config = path.join(work, 'tiny.yaml');
  writeFileSync(config, `encoder:\n  name: tiny\n  path: ${dir}\n  model_type: embedding\n`);
}, 60_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

const environOf = (pid: number) => new Map(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean).map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]));

async function serveAndReadEnviron(file: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Map<string, string>> {
  const served = await startListening(file, [...args, '--http-hostname', '127.0.0.1', '--http-port', '0', '--disable-grpc'], { cacheDir: path.join(work, 'cache'), env }, /HTTP +(http:\/\/\S+)/);
  try {
    // the process the test spawned is the one serving: execve keeps its id
    expect((await fetch(`${served.address}/health`)).status).toBe(200);
    return environOf(served.child.pid!);
  } finally {
    await served.stop();
  }
}

describe.runIf(glibc)('serve with glibc', () => {
  const fromSource = [path.join(repoRoot, 'src', 'cli', 'main.ts'), 'serve', '--config'];

  it('runs with the mmap threshold fixed, in the process that was started', { timeout: 60_000 }, async () => {
    const environ = await serveAndReadEnviron(process.execPath, [...fromSource, config]);
    expect(environ.get('MALLOC_MMAP_THRESHOLD_')).toBe(String(MMAP_THRESHOLD_BYTES));
  });

  it('keeps a threshold the user set', { timeout: 60_000 }, async () => {
    const environ = await serveAndReadEnviron(process.execPath, [...fromSource, config], { MALLOC_MMAP_THRESHOLD_: '4194304' });
    expect(environ.get('MALLOC_MMAP_THRESHOLD_')).toBe('4194304');
  });

  it.runIf(hasBaseRuntime())('the single executable does the same', { timeout: 60_000 }, async () => {
    const environ = await serveAndReadEnviron(baseRuntimePath(), ['serve', '--config', config]);
    expect(environ.get('MALLOC_MMAP_THRESHOLD_')).toBe(String(MMAP_THRESHOLD_BYTES));
  });

  it('only serve and mcp are re-executed: not infer, build or serve --help (execve observed, not run)', () => {
    type Execve = (file: string, args: string[], env: NodeJS.ProcessEnv) => void;
    const execve = vi.spyOn(process as unknown as { execve: Execve }, 'execve').mockImplementation(() => undefined);
    const saved = process.env.MALLOC_MMAP_THRESHOLD_;
    delete process.env.MALLOC_MMAP_THRESHOLD_;
    try {
      for (const argv of [['infer', 'x'], ['build', '-f', 'c.yaml'], ['serve', '--help'], ['mcp', '-h'], ['gateway', 'serve']]) reexecWithMallocTuning(argv);
      expect(execve).not.toHaveBeenCalled();
      reexecWithMallocTuning(['mcp', '--port', '9100']);
      expect(execve).toHaveBeenCalledTimes(1);
      reexecWithMallocTuning(['serve', '--config', 'c.yaml']);
      expect(execve).toHaveBeenCalledTimes(2);
      const [file, args, env] = execve.mock.calls[1];
      expect(file).toBe(process.execPath);
      expect(args[0]).toBe(process.execPath);
      expect(env.MALLOC_MMAP_THRESHOLD_).toBe(String(MMAP_THRESHOLD_BYTES));
    } finally {
      execve.mockRestore();
      if (saved !== undefined) process.env.MALLOC_MMAP_THRESHOLD_ = saved;
    }
  });
});
