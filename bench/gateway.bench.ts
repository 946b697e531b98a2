/**
 * npm run bench:gateway — non-streaming chat completions against a loopback fake OpenAI-compatible provider,
 * (a) directly and (b) through `encoder gateway serve` with a virtual key that has a budget (so every call does
 * the key lookup, the budget reservation, the usage row and the settlement), at concurrency 1, 32 and 128, with
 * the gateway on SQLite and on PostgreSQL, calling `openai:gpt-fake` and a model route of two targets of equal
 * priority (weights 1:1, both priced, so every call also plans the route and reserves for the dearer target). Requests per second, latency p50/p99, the latency the gateway adds
 * (p50 and p99 through it minus direct at the same concurrency) and the gateway's memory (RSS at the end, peak).
 * The fake provider and the gateway run as their own processes; this process only sends requests.
 *
 * The direct provider is measured just before each cell, for the ratio gateway / direct.
 *
 * Options: --seconds <n> per measurement (default 4), --only sqlite|postgres, --usage-rows <n>: the SQLite usage
 * table already holds n rows of the bench key before the first call (a gateway that has served for a while; written
 * directly, ids made as the gateway makes them), --compare <dir>[,<dir>…]: also the gateways of these source trees
 * (other checkouts, e.g. `git worktree add ../base <commit>` with node_modules linked), started together with this
 * one's, each on a database (PostgreSQL: a server) of its own, and measured cell by cell in turn, --rounds <n>: every cell n times (the variants' order rotating),
 * --concurrency <n>[,<n>…]: only these (default 1,32,128), --priority: the bench's session at nice -20 (bench/measure.ts).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { FakeOpenAIProcess } from '../test/fakes/openai-compatible-process.ts';
import { startPostgres } from '../test/gateway/helpers/postgres.ts';
import { management, prefillUsage, startGatewayProcess, type GatewayProcess } from './gateway-process.ts';
import { ms, printTable, takePriorityIfAsked } from './measure.ts';

const DEFAULT_CONCURRENCY = [1, 32, 128];
/** The model route the second gateway rows call: two targets sharing the calls. */
const ROUTE = 'bench-route';
const args = process.argv.slice(2);
const option = (name: string) => {
  const at = args.indexOf(name);
  return at === -1 ? undefined : args[at + 1];
};

await main();

interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** CPU the measured process spent per request in the timed window, in µs (when one was named). */
  cpuPerRequest?: number;
  /** CPU the database server (all its processes) spent per request in the timed window, in µs (when it was named). */
  databaseCpuPerRequest?: number;
}

/**
 * Sends the same chat completion for `seconds` with `concurrency` callers on keep-alive connections; with `pid`, also
 * the CPU that process spent per request meanwhile (a figure that moves less than req/s with what else the cores run).
 */
async function load(url: string, key: string, concurrency: number, seconds: number, model = 'openai:gpt-fake', pid?: number, databasePid?: number): Promise<Measurement> {
  const target = new URL(`${url}/chat/completions`);
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 16 });
  const send = () =>
    new Promise<number>((resolve, reject) => {
      const request = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          method: 'POST',
          agent,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode ?? 0));
        },
      );
      request.on('error', reject);
      request.end(body);
    });
  // Warm up connections and JIT.
  for (let i = 0; i < Math.max(50, concurrency * 2); i++) await send();
  const latencies: number[] = [];
  let errors = 0;
  const deadline = performance.now() + seconds * 1000;
  const started = performance.now();
  const cpuBefore = pid === undefined ? 0 : cpuMsOf(pid);
  const databaseCpuBefore = databasePid === undefined ? 0 : serverCpuMsOf(databasePid);
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        const start = performance.now();
        const status = await send().catch(() => 0);
        latencies.push(performance.now() - start);
        if (status !== 200) errors++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const cpuPerRequest = pid === undefined ? undefined : ((cpuMsOf(pid) - cpuBefore) * 1000) / latencies.length;
  const databaseCpuPerRequest = databasePid === undefined ? undefined : ((serverCpuMsOf(databasePid) - databaseCpuBefore) * 1000) / latencies.length;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return { rps: latencies.length / elapsed, p50: at(0.5), p99: at(0.99), errors, cpuPerRequest, databaseCpuPerRequest };
}

/** The fields of /proc/<pid>/stat after the command (index 11, 12: user and system ticks; 13, 14: of waited-for children). */
function statOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ').map(Number);
}

/** User and system CPU time a process has used, in ms (Linux: /proc/<pid>/stat, in clock ticks of 10 ms). */
function cpuMsOf(pid: number): number {
  const fields = statOf(pid);
  return (fields[11] + fields[12]) * 10;
}

/**
 * CPU time a server and its child processes (PostgreSQL's backends, WAL writer, …) have used, in ms: the live
 * children's own and the ended ones' as counted in the server's. Unlike req/s it hardly moves with what else the
 * shared cores run, so it shows what the database costs per call.
 */
function serverCpuMsOf(pid: number): number {
  const own = statOf(pid);
  let ticks = own[11] + own[12] + own[13] + own[14];
  for (const child of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean)) {
    try {
      const fields = statOf(Number(child));
      ticks += fields[11] + fields[12];
    } catch {
      // ended since the listing: its time is in the server's children count from now on
    }
  }
  return ticks * 10;
}

/** Resident and peak resident memory of a process, in MiB (Linux). */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

/** A source tree whose gateway is measured: this one, or another checkout given with --compare. */
interface Variant {
  label: string;
  root?: string;
}

async function main(): Promise<void> {
  takePriorityIfAsked();
  const seconds = Number(option('--seconds') ?? 4);
  const only = option('--only');
  const usageRows = Number(option('--usage-rows') ?? 0);
  const rounds = Number(option('--rounds') ?? 1);
  const concurrencies = option('--concurrency')?.split(',').map(Number) ?? DEFAULT_CONCURRENCY;
  const compare = option('--compare')?.split(',').filter(Boolean) ?? [];
  const variants: Variant[] = [{ label: compare.length > 0 ? 'this' : '' }, ...compare.map((root) => ({ label: path.basename(path.resolve(root)), root: path.resolve(root) }))];
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-bench-'));
  // Keeps no requests: the benchmark sends hundreds of thousands.
  const provider = await FakeOpenAIProcess.start({ record: false });
  const cleanups: (() => Promise<void> | void)[] = [() => provider.close(), () => rmSync(dir, { recursive: true, force: true })];
  try {
    /** A database for each variant's gateway: a SQLite file, or a PostgreSQL server of its own (whose CPU is measured). */
    const databases: { name: string; open: (variant: number) => Promise<{ url: string; file?: string; pid?: number }> }[] = [];
    if (only !== 'postgres') {
      databases.push({
        name: 'SQLite',
        open: async (variant) => {
          const file = path.join(dir, `gateway-${variant}.db`);
          return { url: `sqlite:${file}`, file };
        },
      });
    }
    if (only !== 'sqlite') {
      // Durable settings (fsync on), as a production server would run.
      const first = await startPostgres({ durable: process.env.BENCH_PG_FSYNC !== 'off' });
      if (first.server) {
        cleanups.push(() => first.server.stop());
        databases.push({
          name: 'PostgreSQL',
          open: async (variant) => {
            let server = first.server;
            if (variant > 0) {
              const started = await startPostgres({ durable: process.env.BENCH_PG_FSYNC !== 'off' });
              if (!started.server) throw new Error(`PostgreSQL could not be started: ${started.reason}`);
              server = started.server;
              cleanups.push(() => server.stop());
            }
            return { url: await server.createDatabase(), pid: server.pid };
          },
        });
      } else {
        console.log(`PostgreSQL skipped: ${first.reason}`);
      }
    }

    const rows: (string | number)[][] = [];
    for (const database of databases) {
      // Every variant's gateway runs at once, each on a database of its own on the same server, and the cells are
      // measured in turn (the order rotating each round), so what else the shared cores run falls on all of them alike.
      const gateways: { gateway: GatewayProcess; key: string; keyId: string; file?: string; pid?: number }[] = [];
      try {
        for (const [i, variant] of variants.entries()) {
          const gatewayDir = path.join(dir, `gateway-${i}`);
          mkdirSync(gatewayDir, { recursive: true });
          const opened = await database.open(i);
          const gateway = await startGatewayProcess(
            opened.url,
            [
              'providers:',
              '  openai:',
              '    api_key: sk-bench',
              `    api_base: ${provider.baseURL}`,
              'pricing:',
              '  openai:gpt-fake: {input_cost_per_million: 0.15, output_cost_per_million: 0.6}',
              '  openai:gpt-fake-2: {input_cost_per_million: 0.3, output_cost_per_million: 1.2}',
              'models:',
              `  ${ROUTE}:`,
              '    - {model: openai:gpt-fake, priority: 0, weight: 1}',
              '    - {model: openai:gpt-fake-2, priority: 0, weight: 1}',
            ],
            gatewayDir,
            variant.root,
          );
          const budget = await management(gateway.url, 'POST', '/v1/budgets', { max_budget: 1_000_000 });
          const key = await management(gateway.url, 'POST', '/v1/keys', { key_name: 'bench', budget_id: budget.budget_id });
          gateways.push({ gateway, key: String(key.key), keyId: String(key.id), ...opened });
          if (usageRows > 0) {
            if (opened.file) prefillUsage(opened.file, usageRows, () => ({ key_id: String(key.id), user_id: null, provider: 'openai', model: 'gpt-fake', status: 'success' }));
            else console.log(`${database.name}: --usage-rows applies to SQLite only; its table starts empty`);
          }
        }
        for (let round = 0; round < rounds; round++) {
          for (const [model, label] of [['openai:gpt-fake', 'provider:model'], [ROUTE, 'route of 2']]) {
            for (const concurrency of concurrencies) {
              // The direct provider just before the gateways: the ratio compares like with like on a busy machine.
              const base = await load(provider.baseURL, 'sk-bench', concurrency, seconds);
              for (let turn = 0; turn < variants.length; turn++) {
                const v = (turn + round) % variants.length;
                const { gateway, key, pid } = gateways[v];
                const through = await load(`${gateway.url}/v1`, key, concurrency, seconds, model, gateway.child.pid, pid);
                const memory = memoryOf(gateway.child.pid!);
                rows.push([
                  database.name,
                  label,
                  concurrency,
                  ...(variants.length > 1 ? [`${variants[v].label}${rounds > 1 ? ` #${round + 1}` : ''}`] : []),
                  Math.round(base.rps),
                  Math.round(through.rps),
                  (through.rps / base.rps).toFixed(3),
                  `${ms(base.p50)} / ${ms(base.p99)}`,
                  `${ms(through.p50)} / ${ms(through.p99)}`,
                  `${ms(through.p50 - base.p50)} / ${ms(through.p99 - base.p99)}`,
                  Math.round(through.cpuPerRequest!),
                  through.databaseCpuPerRequest === undefined ? '' : Math.round(through.databaseCpuPerRequest),
                  `${memory.rss.toFixed(0)} / ${memory.peak.toFixed(0)}`,
                  through.errors + base.errors,
                ]);
              }
            }
          }
        }
        for (const [i, { gateway, keyId, file }] of gateways.entries()) {
          const { totals } = (await management(gateway.url, 'GET', `/v1/keys/${keyId}/usage?limit=1`)) as { totals: { requests: number } };
          console.log(`${database.name}${variants[i].label ? ` (${variants[i].label})` : ''}: ${totals.requests - (file ? usageRows : 0)} usage rows recorded for the calls through the gateway`);
        }
      } finally {
        for (const { gateway } of gateways) await gateway.stop();
      }
    }
    printTable(
      `Gateway overhead, non-streaming chat completions, ${seconds} s per cell${rounds > 1 ? `, ${rounds} rounds` : ''}${usageRows > 0 ? `, ${usageRows} usage rows before the first call (SQLite)` : ''} (node ${process.versions.node}, ${os.cpus().length} cores, load average ${os.loadavg().map((load) => load.toFixed(1)).join(' ')} at the end)`,
      [
        'database',
        'model',
        'concurrency',
        ...(variants.length > 1 ? ['gateway of'] : []),
        'direct req/s',
        'gateway req/s',
        'gateway / direct',
        'direct p50 / p99 ms',
        'gateway p50 / p99 ms',
        'added p50 / p99 ms',
        'gateway CPU µs / request',
        'PostgreSQL CPU µs / request',
        'gateway RSS / peak MiB',
        'errors',
      ],
      rows,
    );
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
  }
}
