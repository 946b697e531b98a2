import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../helpers/shared-fixtures.ts';
import { MASTER_KEY, TEST_PRICING } from './gateway.ts';

export interface GatewayChild {
  child: ChildProcess;
  url: string;
  /** SIGKILL, resolved once the process is gone. */
  kill(): Promise<void>;
  /** What the process wrote to stderr so far. */
  stderr(): string;
}

/**
 * `encoder gateway serve` as its own process, as users run it, with the fake OpenAI provider at `providerUrl` and
 * `openai:gpt-fake` priced at TEST_PRICING; resolves with its URL once it listens. `config` lines are added to the
 * configuration file. Register the child with the test's cleanup (kill it in afterAll).
 */
export async function spawnGateway(options: { databaseUrl: string; dir: string; providerUrl: string; config?: string[] }): Promise<GatewayChild> {
  const config = path.join(options.dir, `gateway-${process.hrtime.bigint()}.yaml`);
  writeFileSync(
    config,
    [
      'master_key: ${TEST_MASTER_KEY}',
      'log_level: warn',
      'instance_lease_seconds: 1',
      'providers:',
      '  openai:',
      '    api_key: sk-test',
      '    api_base: ${FAKE_PROVIDER_URL}',
      'pricing:',
      `  openai:gpt-fake: ${JSON.stringify(TEST_PRICING)}`,
      ...(options.config ?? []),
      '',
    ].join('\n'),
  );
  const child = spawn(
    path.join(repoRoot, 'node_modules', '.bin', 'node'),
    [path.join(repoRoot, 'src', 'cli', 'main.ts'), 'gateway', 'serve', '--config', config, '--host', '127.0.0.1', '--port', '0', '--database-url', options.databaseUrl],
    { env: { PATH: process.env.PATH, TEST_MASTER_KEY: MASTER_KEY, FAKE_PROVIDER_URL: options.providerUrl }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`gateway did not start in 60 s: ${stderr}`));
    }, 60_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /listening on (http:\/\/[^\s]+)/.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}: ${stderr}`));
    });
  });
  return {
    child,
    url,
    stderr: () => stderr,
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** A management call with the master key; the parsed answer (throws unless 2xx). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are checked field by field
export async function manage(url: string, method: string, pathname: string, body?: unknown): Promise<any> {
  const response = await fetch(`${url}${pathname}`, {
    method,
    headers: { 'x-hub-key': `Bearer ${MASTER_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${pathname}: ${response.status} ${text}`);
  return JSON.parse(text) as unknown;
}
