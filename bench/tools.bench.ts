/**
 * npm run bench:tools — what the tool server adds to an MCP call. For a stdio tool call (server-everything's
 * get-sum) and a resource read (demo://resource/dynamic/text/1), at concurrency 1 and 32:
 *   direct:        the MCP SDK client calling a server-everything process over stdio;
 *   /api/v1:       POST /api/v1/servers/everything/tools/get-sum (or GET …/resources/content) on `encoder tools serve`
 *                  (its own process, in front of its own server-everything process), from a keep-alive HTTP client;
 *   /api/v1 + key: the same on a second tool server that has auth.keys, with `Authorization: Bearer <key>`;
 *   /mcp + key:    the MCP SDK client over Streamable HTTP to that server's /mcp (`everything__get-sum`).
 * Calls per second, p50/p99 latency, and the latency each path adds over direct. Medians of five rounds, the paths
 * measured one after the other in each round.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { apiKeyDigest, generateApiKey } from '../src/tools/auth.ts';
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
function request(port: number, method: string, urlPath: string, body?: string, key?: string): Promise<string> {
  const headers: Record<string, string | number> = body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {};
  if (key) headers.authorization = `Bearer ${key}`;
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, agent, headers }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (data += chunk));
      res.on('end', () => (res.statusCode === 200 ? resolve(data) : reject(new Error(`${res.statusCode}: ${data}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function startToolServer(dir: string, key?: string): Promise<{ port: number; stop: () => Promise<void> }> {
  const config = path.join(dir, key ? 'tools-keys.yaml' : 'tools.yaml');
  const auth = key ? `auth:\n  keys:\n    bench: {sha256: ${apiKeyDigest(key)}, servers: "*"}\n` : '';
  writeFileSync(config, `servers:\n  everything:\n    command: ${NODE}\n    args: [${EVERYTHING}, stdio]\n${auth}`);
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

type Path = 'direct' | '/api/v1' | '/api/v1 + key' | '/mcp + key';
const PATHS: Path[] = ['direct', '/api/v1', '/api/v1 + key', '/mcp + key'];

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tools-bench-'));
  const direct = new Client({ name: 'bench', version: '1' });
  await direct.connect(new StdioClientTransport({ command: NODE, args: [EVERYTHING, 'stdio'], stderr: 'ignore' }));
  await direct.listTools();
  const key = generateApiKey();
  const open = await startToolServer(dir);
  const keyed = await startToolServer(dir, key);
  const mcp = new Client({ name: 'bench', version: '1' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${keyed.port}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  await mcp.listTools();
  const uri = 'demo://resource/dynamic/text/1';
  const resourcePath = `/api/v1/servers/everything/resources/content?uri=${encodeURIComponent(uri)}`;
  const operations: { name: string; send: Record<Path, () => Promise<void>> }[] = [
    {
      name: 'tool call (get-sum)',
      send: {
        direct: async () => void (await direct.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })),
        '/api/v1': async () => void (await request(open.port, 'POST', '/api/v1/servers/everything/tools/get-sum', '{"a":1,"b":2}')),
        '/api/v1 + key': async () => void (await request(keyed.port, 'POST', '/api/v1/servers/everything/tools/get-sum', '{"a":1,"b":2}', key)),
        '/mcp + key': async () => void (await mcp.callTool({ name: 'everything__get-sum', arguments: { a: 1, b: 2 } })),
      },
    },
    {
      name: 'resource read',
      send: {
        direct: async () => void (await direct.readResource({ uri })),
        '/api/v1': async () => void (await request(open.port, 'GET', resourcePath)),
        '/api/v1 + key': async () => void (await request(keyed.port, 'GET', resourcePath, undefined, key)),
        '/mcp + key': async () => void (await mcp.readResource({ uri })),
      },
    },
  ];
  const rows: string[][] = [];
  try {
    for (const operation of operations) {
      for (const concurrency of CONCURRENCY) {
        const count = callsFor(concurrency);
        // Warm every path (JIT, connections).
        for (const each of PATHS) await measure(300, concurrency, operation.send[each]);
        const rounds: Record<Path, Stats>[] = [];
        for (let round = 0; round < ROUNDS; round++) {
          const stats = {} as Record<Path, Stats>;
          for (const each of PATHS) stats[each] = await measure(count, concurrency, operation.send[each]);
          rounds.push(stats);
        }
        const med = (pick: (r: Record<Path, Stats>) => number) => median(rounds.map(pick));
        for (const each of PATHS) {
          rows.push([
            operation.name,
            String(concurrency),
            each,
            med((r) => r[each].callsPerSecond).toFixed(0),
            med((r) => r[each].p50).toFixed(3),
            med((r) => r[each].p99).toFixed(3),
            each === 'direct' ? '' : med((r) => r[each].callsPerSecond / r.direct.callsPerSecond).toFixed(2),
            each === 'direct' ? '' : med((r) => r[each].p50 - r.direct.p50).toFixed(3),
            each === 'direct' ? '' : med((r) => r[each].p99 - r.direct.p99).toFixed(3),
          ]);
        }
        console.error(`done: ${operation.name} at concurrency ${concurrency}`);
      }
    }
  } finally {
    await direct.close();
    await mcp.close();
    await open.stop();
    await keyed.stop();
    agent.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
  printTable(
    `Tool server vs direct MCP SDK client, server-everything over stdio (${os.cpus().length} cores, Node ${process.version}; medians of ${ROUNDS} rounds)`,
    ['operation', 'concurrency', 'path', 'calls/s', 'p50 ms', 'p99 ms', 'calls/s vs direct', 'added p50 ms', 'added p99 ms'],
    rows,
  );
}

await main();
