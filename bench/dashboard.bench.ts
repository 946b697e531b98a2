/**
 * node bench/dashboard.bench.ts — how small and quick the gateway dashboard is (docs/benchmarks.md, docs/gateway.md).
 *
 * 1. Bytes on the wire: each dashboard file raw and gzipped, against the one other web page this project serves (the
 *    tool server's /docs, Swagger UI's two files).
 * 2. Bundling: esbuild building the dashboard in memory (what `gateway serve` from source does at start), median of 9.
 * 3. Loading: headless Chromium (Debian's, as in the tests) opening the dashboard signed in until the Overview is drawn
 *    (its four API calls answered, charts included), measured by the page's own clock from navigation start, against a
 *    gateway on loopback with 1,000 usage rows; median of 9 fresh pages after 2 warm-ups.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { readFileSync } from 'node:fs';
import { bundleDashboard } from '../src/gateway/dashboard/bundle.ts';
import { DASHBOARD_FILES } from '../src/gateway/dashboard/files.ts';
import { startGateway } from '../src/gateway/gateway.ts';
import { SWAGGER_UI_FILES } from '../src/tools/http/docs-page.ts';
import { CHROMIUM_PATH, launchChromium } from '../test/gateway/helpers/browser.ts';
import { MASTER_KEY, testConfig } from '../test/gateway/helpers/gateway.ts';
import { median, ms, printTable, time } from './measure.ts';

const require = createRequire(import.meta.url);
const kib = (bytes: number) => (bytes / 1024).toFixed(1);

const files = await bundleDashboard();
const sizes = DASHBOARD_FILES.map((file) => [file, files[file].length, gzipSync(files[file]).length] as const);
const swagger = SWAGGER_UI_FILES.map((file) => readFileSync(require.resolve(`swagger-ui-dist/${file}`)));
const dashboardGzip = sizes.reduce((sum, [, , gzip]) => sum + gzip, 0);
const swaggerGzip = swagger.reduce((sum, bytes) => sum + gzipSync(bytes).length, 0);
printTable('Dashboard files (KiB)', ['file', 'raw', 'gzip'], [
  ...sizes.map(([file, raw, gzip]) => [file, kib(raw), kib(gzip)]),
  ['**dashboard, all files**', kib(sizes.reduce((sum, [, raw]) => sum + raw, 0)), kib(dashboardGzip)],
  ['Swagger UI (tool server /docs), both files', kib(swagger.reduce((sum, bytes) => sum + bytes.length, 0)), kib(swaggerGzip)],
  ['ratio dashboard / Swagger UI (gzip)', '', (dashboardGzip / swaggerGzip).toFixed(3)],
]);

const bundling = await time(() => bundleDashboard(), { runs: 9, warmup: 1 });
printTable('Bundling the dashboard with esbuild (ms)', ['step', 'median', 'min'], [['bundleDashboard()', ms(bundling.medianMs), ms(bundling.minMs)]]);

const dir = mkdtempSync(path.join(os.tmpdir(), 'dashboard-bench-'));
const gateway = await startGateway(testConfig(`sqlite:${path.join(dir, 'gateway.db')}`), { version: 'bench', dashboard: files });
try {
  const now = Date.now();
  await gateway.store.usage.record(
    Array.from({ length: 1000 }, (_, i) => ({
      id: `b${String(i).padStart(5, '0')}`,
      request_id: `r${i}`,
      created_at: now - (i % 24) * 3_600_000 - i,
      user_id: `user-${i % 7}`,
      key_id: null,
      endpoint: 'chat.completions',
      provider: 'openai',
      model: `model-${i % 5}`,
      prompt_tokens: 100,
      completion_tokens: 50,
      search_units: 0,
      cost_nanos: 1_000_000n,
      status: i % 20 === 0 ? 'error' : 'success',
      status_code: i % 20 === 0 ? 502 : 200,
      duration_ms: 100,
    })),
    [],
  );
  const browser = await launchChromium();
  try {
    const context = await browser.newContext();
    // Signed in, and a watcher that notes (on the page's own clock, from navigation start) when the Overview is drawn.
    // Signed in, and a watcher that notes (on the page's own clock, from navigation start) when the Overview is drawn;
    // page code, so given as text (this file is type-checked for Node).
    await context.addInitScript({
      content: `sessionStorage.setItem('gateway-dashboard.master-key', ${JSON.stringify(MASTER_KEY)});
const watcher = new MutationObserver(() => {
  const content = document.querySelector('section.content');
  if (content && !content.hasAttribute('aria-busy') && content.querySelector('svg.chart')) {
    window.drawnAt = performance.now();
    watcher.disconnect();
  }
});
watcher.observe(document, { subtree: true, childList: true, attributes: true });`,
    });
    /** Page-clock times (ms from navigation start): files loaded, API calls sent and answered, Overview drawn. */
    const load = async () => {
      const page = await context.newPage();
      await page.goto(`${gateway.url}/dashboard/#/overview`);
      await page.waitForFunction(() => (globalThis as { drawnAt?: number }).drawnAt);
      const phases = await page.evaluate(() => {
        const resources = performance.getEntriesByType('resource') as PerformanceResourceTiming[];
        const api = resources.filter((entry) => new URL(entry.name).pathname.startsWith('/v1/'));
        const files = resources.filter((entry) => new URL(entry.name).pathname.startsWith('/dashboard/'));
        return {
          filesLoaded: Math.max(...files.map((entry) => entry.responseEnd)),
          apiSent: Math.min(...api.map((entry) => entry.startTime)),
          apiAnswered: Math.max(...api.map((entry) => entry.responseEnd)),
          drawn: (globalThis as unknown as { drawnAt: number }).drawnAt,
        };
      });
      await page.close();
      return phases;
    };
    for (let i = 0; i < 2; i++) await load();
    const samples: Awaited<ReturnType<typeof load>>[] = [];
    for (let i = 0; i < 9; i++) samples.push(await load());
    const row = (label: string, values: number[]) => [label, ms(median(values)), ms(Math.min(...values))];
    printTable(
      `Opening the Overview in headless Chromium (${CHROMIUM_PATH}), 1,000 usage rows; load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores (ms)`,
      ['phase (page clock)', 'median', 'min'],
      [
        row('navigation start → page, script and stylesheet loaded', samples.map((s) => s.filesLoaded)),
        row('files loaded → script sends its 4 API calls (parse, run)', samples.map((s) => s.apiSent - s.filesLoaded)),
        row('4 API calls in parallel, first sent → last answered', samples.map((s) => s.apiAnswered - s.apiSent)),
        row('last answer → Overview drawn (tiles, 4 charts, table)', samples.map((s) => s.drawn - s.apiAnswered)),
        row('**navigation start → Overview drawn**', samples.map((s) => s.drawn)),
      ],
    );
  } finally {
    await browser.close();
  }
} finally {
  await gateway.close();
  rmSync(dir, { recursive: true, force: true });
}
