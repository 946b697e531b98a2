/**
 * npm run bench:tools — what the tool server adds to an MCP call. For a stdio tool call (server-everything's
 * get-sum) and a resource read (demo://resource/dynamic/text/1), at concurrency 1 and 32:
 *   direct: the MCP SDK client calling a server-everything process over stdio;
 *   API:    POST /api/v1/servers/everything/tools/get-sum (or GET …/resources/content) on `encoder tools serve`
 *           (its own process, in front of its own server-everything process), from a keep-alive HTTP client.
 * Calls per second, p50/p99 latency, and the latency the API adds (API − direct). Medians of five rounds.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { median, printTable } from './measure.ts';

const root = path.resolve(import.meta.dirname, '..');
const NODE = process.execPath;
const EVERYTHING = path.join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const CONCURRENCY = [1, 32];
const ROUNDS = 5;
const callsFor = (concurrency: number) => (concurrency === 1 ? 3000 : 8000);

interface Stats {
  callsPerSecond: number;
  p50: number;
  p99: number;
}

async function measure(count: number, concurrency: number, send: () => Promise<void>): Promise<Stats> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        const t0 = performance.now();
        await send();
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { callsPerSecond: count / seconds, p50: latencies[Math.floor(latencies.length * 0.5)], p99: latencies[Math.floor(latencies.length * 0.99)] };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
function request(port: number, method: string, urlPath: string, body?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, agent, headers: body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {} }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (data += chunk));
      res.on('end', () => (res.statusCode === 200 ? resolve(data) : reject(new Error(`${res.statusCode}: ${data}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function startToolServer(dir: string): Promise<{ port: number; stop: () => Promise<void> }> {
  const config = path.join(dir, 'tools.yaml');
  writeFileSync(config, `servers:\n  everything:\n    command: ${NODE}\n    args: [${EVERYTHING}, stdio]\n`);
  const child = spawn(NODE, [path.join(root, 'src/cli/main.ts'), 'tools', 'serve', '--config', config, '--addr', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setInterval(() => {
      const match = /tool server on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
      if (match && stderr.includes('[everything] connected')) {
        clearInterval(timer);
        resolve(Number(match[1]));
      }
      if (child.exitCode !== null) reject(new Error(stderr));
    }, 50);
  });
  return {
    port,
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tools-bench-'));
  const direct = new Client({ name: 'bench', version: '1' });
  await direct.connect(new StdioClientTransport({ command: NODE, args: [EVERYTHING, 'stdio'], stderr: 'ignore' }));
  await direct.listTools();
  const server = await startToolServer(dir);
  const uri = 'demo://resource/dynamic/text/1';
  const operations = [
    {
      name: 'tool call (get-sum)',
      direct: async () => void (await direct.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })),
      api: async () => void (await request(server.port, 'POST', '/api/v1/servers/everything/tools/get-sum', '{"a":1,"b":2}')),
    },
    {
      name: 'resource read',
      direct: async () => void (await direct.readResource({ uri })),
      api: async () => void (await request(server.port, 'GET', `/api/v1/servers/everything/resources/content?uri=${encodeURIComponent(uri)}`)),
    },
  ];
  const rows: string[][] = [];
  try {
    for (const operation of operations) {
      for (const concurrency of CONCURRENCY) {
        const count = callsFor(concurrency);
        // Warm both paths (JIT, connections).
        await measure(300, concurrency, operation.direct);
        await measure(300, concurrency, operation.api);
        const rounds: { direct: Stats; api: Stats }[] = [];
        for (let round = 0; round < ROUNDS; round++) {
          rounds.push({ direct: await measure(count, concurrency, operation.direct), api: await measure(count, concurrency, operation.api) });
        }
        const med = (pick: (r: { direct: Stats; api: Stats }) => number) => median(rounds.map(pick));
        const d = { cps: med((r) => r.direct.callsPerSecond), p50: med((r) => r.direct.p50), p99: med((r) => r.direct.p99) };
        const a = { cps: med((r) => r.api.callsPerSecond), p50: med((r) => r.api.p50), p99: med((r) => r.api.p99) };
        rows.push([
          operation.name,
          String(concurrency),
          `${d.cps.toFixed(0)} / ${d.p50.toFixed(3)} / ${d.p99.toFixed(3)}`,
          `${a.cps.toFixed(0)} / ${a.p50.toFixed(3)} / ${a.p99.toFixed(3)}`,
          (a.cps / d.cps).toFixed(2),
          (med((r) => r.api.p50 - r.direct.p50)).toFixed(3),
          (med((r) => r.api.p99 - r.direct.p99)).toFixed(3),
        ]);
        console.error(`done: ${operation.name} at concurrency ${concurrency}`);
      }
    }
  } finally {
    await direct.close();
    await server.stop();
    agent.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
  printTable(
    `Tool server vs direct MCP SDK client, server-everything over stdio (${os.cpus().length} cores, Node ${process.version}): calls/s / p50 ms / p99 ms`,
    ['operation', 'concurrency', 'direct SDK client', 'through /api/v1', 'API/direct calls/s', 'added p50 ms', 'added p99 ms'],
    rows,
  );
}

await main();
