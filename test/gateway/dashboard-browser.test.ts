import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleDashboard } from '../../src/gateway/dashboard/bundle.ts';
import type { DashboardFiles } from '../../src/gateway/dashboard/files.ts';
import type { UsageRecord } from '../../src/gateway/storage/records.ts';
import { CHAT_USAGE, FakeOpenAIServer } from '../fakes/openai-compatible.ts';
import { browserSkipReason, launchChromium } from './helpers/browser.ts';
import { CHAT_COST, MASTER_KEY, PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES, sqliteBackend, startTestGateway, TEST_PRICING, type TestGateway } from './helpers/gateway.ts';

// The dashboard in headless Chromium against a real gateway (SQLite) and the fake OpenAI provider: sign in, create a
// budget, a user and a key, make calls with the key (one through a model route that falls back), see them in the
// Overview and the Usage table (names, route, attempts, reasons; and its CSV), see a call held open by a slow provider
// in the Live view, see an overspent budget warned of, deactivate the key and see the next call refused; edit prices,
// a route and providers (the next call's cost and target change; the API's 400s shown at their fields); a wrong key,
// a 500 and an ended session are shown. Every page passes axe-core (no serious or critical violation) on a desktop
// and at 390 px, where the page never scrolls sideways. Every page is photographed into SCREENSHOTS, at both widths
// (DASHBOARD_SCREENSHOTS_DIR=docs/images refreshes the docs' copies, see docs/gateway.md).

const SCREENSHOTS = path.resolve(process.env.DASHBOARD_SCREENSHOTS_DIR ?? '.cache/screenshots/dashboard');
const skipReason = browserSkipReason();

const HOUR = 3_600_000;
/** Usage rows of earlier hours, so the charts have a shape: 30 calls of bob over the last day, 2 of them failed. */
const SEEDED = 30;
const SEEDED_ERRORS = 2;
/** Calls the test makes with its key: three answered, one the provider fails. */
const KEY_CALLS = 3;
const KEY_FAILURES = 1;
const HOSTILE_ALIAS = '<img src=x onerror="window.pwned=1">Alice';
/** The name alice gets once the hostile one has been shown to be harmless. */
const ALICE = 'Alice Liddell';
/** A model route whose first target the fake provider fails once: the call falls back to the second. */
const ROUTE = 'smart';
/** The width of a small phone. */
const PHONE = { width: 390, height: 844 };
/** axe-core's source, run in the page through the DevTools protocol (the page's CSP admits no inline script). */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const backend = sqliteBackend();
let databaseUrl: string;
let gateway: TestGateway;
let fake: FakeOpenAIServer;
let files: DashboardFiles;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const cspViolations: string[] = [];
const pageErrors: string[] = [];

function seededRows(now: number): UsageRecord[] {
  return Array.from({ length: SEEDED }, (_, i) => ({
    id: `seed${String(i).padStart(4, '0')}`,
    request_id: `seed-${i}`,
    created_at: now - (1 + (i % 20)) * HOUR - i * 1000,
    user_id: 'bob',
    key_id: null,
    endpoint: 'chat.completions',
    provider: 'openai',
    model: i % 3 === 0 ? 'fake-model-2' : 'fake-model-1',
    prompt_tokens: 200 + i * 10,
    completion_tokens: 100 + i * 5,
    search_units: 0,
    cost_nanos: BigInt((200 + i * 10) * 1_000_000 + (100 + i * 5) * 2_000_000),
    status: i < SEEDED_ERRORS ? 'error' : 'success',
    status_code: i < SEEDED_ERRORS ? 502 : 200,
    duration_ms: 300 + i,
  }));
}

async function startGatewayOn(port: number, masterKey: string): Promise<TestGateway> {
  return startTestGateway(
    databaseUrl,
    {
      port,
      masterKey,
      providers: { openai: { api_key: 'sk-provider-secret', api_base: fake.baseURL } },
      pricing: { 'openai:fake-model-1': TEST_PRICING, 'openai:fake-model-2': TEST_PRICING },
      models: { [ROUTE]: { targets: [{ model: 'openai:fake-model-2' }, { model: 'openai:fake-model-1' }] } },
    },
    { dashboard: files },
  );
}

async function chat(key: string, model = 'openai:fake-model-1', signal?: AbortSignal): Promise<{ status: number; json: { error?: { code: string } } }> {
  const response = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    // a limit the $1 budget can hold (without one the hold is 1,024 output tokens at $2,000 per million)
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8 }),
    signal,
  });
  return { status: response.status, json: (await response.json()) as { error?: { code: string } } };
}

/** The text of the field error shown in `form` (a 400 naming one of its fields). */
const fieldError = (form: Locator) => form.locator('.field-error').textContent({ timeout: 10_000 });

/** The name attribute of the element with keyboard focus. */
const focusedName = () => page.evaluate('document.activeElement && document.activeElement.getAttribute("name")');

/** The cost of the newest usage row, in dollars. */
async function newestCost(): Promise<number> {
  return (await gateway.call('GET', '/v1/usage?limit=1')).json.data[0].cost as number;
}

const shoot = (name: string, on: Page = page) => on.screenshot({ path: path.join(SCREENSHOTS, `dashboard-${name}.png`), fullPage: true });
const go = async (route: string, on: Page = page) => {
  await on.getByRole('link', { name: route, exact: true }).click();
  await on.locator('section.content:not([aria-busy])').waitFor();
  await on.getByRole('heading', { level: 1, name: route }).waitFor();
};

// Page code below is given as text: this file is type-checked without the DOM's types.

/** axe-core's serious and critical violations on the page as it is now (each: rule, impact, the first elements). */
async function accessibilityViolations(on: Page): Promise<{ id: string; impact: string; help: string; targets: string[] }[]> {
  if (!(await on.evaluate(() => 'axe' in globalThis))) await on.evaluate(AXE_SOURCE);
  return on.evaluate(`axe.run(document).then(({ violations }) => violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => ({ id: violation.id, impact: violation.impact, help: violation.help, targets: violation.nodes.slice(0, 5).map((node) => node.target.join(' ')) })))`);
}

/** How far the page scrolls sideways (0: not at all). */
const sidewaysScroll = (on: Page) => on.evaluate<number>('document.scrollingElement.scrollWidth - window.innerWidth');

/** The element that has keyboard focus: its text, id, tag, whether it is in the navigation, its focus ring. */
const focused = (on: Page) =>
  on.evaluate<{ text: string; id: string; tag: string; inNav: boolean; outline: string; outlineWidth: number; top: number }>(`(() => {
    const element = document.activeElement;
    const style = getComputedStyle(element);
    return { text: element.textContent, id: element.id, tag: element.tagName, inNav: element.closest('nav') !== null, outline: style.outlineStyle, outlineWidth: parseFloat(style.outlineWidth), top: element.getBoundingClientRect().top };
  })()`);

/** The pages the navigation links to, by their link text. */
const pageNames = (on: Page) => on.locator('nav a').allTextContents();

beforeAll(async () => {
  if (skipReason) return;
  mkdirSync(SCREENSHOTS, { recursive: true });
  [files, fake] = await Promise.all([bundleDashboard(), FakeOpenAIServer.start()]);
  databaseUrl = await backend.newDatabaseUrl();
  gateway = await startGatewayOn(0, MASTER_KEY);
  await gateway.store.usage.record(seededRows(Date.now()), []);
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 860 }, permissions: ['clipboard-read', 'clipboard-write'], acceptDownloads: true });
  page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
  });
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('dialog', (dialog) => void dialog.accept());
});

afterAll(async () => {
  await browser?.close();
  await gateway?.close();
  await fake?.close();
  await backend.close();
});

describe.skipIf(skipReason)('the dashboard in Chromium', () => {
  let secret = '';
  let budgetId = '';
  /** A key without a budget, for the calls that check what the configuration pages change. */
  let configKey = '';

  it('refuses a wrong master key with a clear message, then signs in', async () => {
    await page.goto(`${gateway.url}/dashboard`);
    await expect(page.getByRole('heading', { name: 'Gateway dashboard' }).isVisible()).resolves.toBe(true);
    await shoot('sign-in');
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.getByLabel('Master key').fill('not-the-master-key-0123456789abcdef');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('alert').textContent({ timeout: 10_000 })).resolves.toContain('That is not the master key of this gateway');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);

    await page.getByLabel('Master key').fill(MASTER_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    expect(page.url()).toMatch(/\/dashboard\/#\/overview$/);
  });

  it('creates a budget, a user (its name shown as text, not markup) and a key whose secret shows once', async () => {
    await go('Budgets');
    const budgetForm = page.getByRole('form', { name: 'Create a budget' });
    await budgetForm.getByLabel('Name').fill('Team budget');
    await budgetForm.getByLabel('Limit (US$)').fill('1');
    await budgetForm.getByLabel('Starts again').selectOption({ label: 'every day' });
    await budgetForm.getByRole('button', { name: 'Create budget' }).click();
    await page.getByRole('cell', { name: 'every day' }).waitFor();
    budgetId = (await gateway.call('GET', '/v1/budgets')).json.data[0].budget_id as string;

    await go('Users');
    const userForm = page.getByRole('form', { name: 'Create a user' });
    await userForm.getByLabel('User id').fill('alice');
    await userForm.getByLabel('Name').fill(HOSTILE_ALIAS);
    await userForm.getByRole('button', { name: 'Create user' }).click();
    await page.getByRole('cell', { name: HOSTILE_ALIAS, exact: true }).waitFor();
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
    expect((await gateway.call('GET', '/v1/users/alice')).json).toMatchObject({ alias: HOSTILE_ALIAS, budget_id: null });

    await go('Keys');
    const keyForm = page.getByRole('form', { name: 'Create a key' });
    await keyForm.getByLabel('Name').fill('alice-app');
    await keyForm.getByLabel('User').selectOption('alice');
    await keyForm.getByLabel('Budget').selectOption(budgetId);
    await keyForm.getByRole('button', { name: 'Create key' }).click();
    const panel = page.getByRole('region', { name: 'New secret' });
    secret = (await panel.locator('code').textContent({ timeout: 10_000 }))!;
    expect(secret).toMatch(/^gw-[\w-]{43}$/);
    await panel.getByRole('button', { name: 'Copy' }).click();
    await panel.getByRole('button', { name: 'Copied' }).waitFor();
    // page code: the browser's navigator, which Node's types do not describe
    expect(await page.evaluate(() => (navigator as unknown as { clipboard: { readText(): Promise<string> } }).clipboard.readText())).toBe(secret);
    const stored = (await gateway.call('GET', '/v1/keys')).json.data[0];
    expect(stored).toMatchObject({ key_name: 'alice-app', user_id: 'alice', budget_id: budgetId, status: 'active', allow_user_override: false });
    // the key's budget by its name, not its id
    expect(await page.getByRole('row').filter({ hasText: 'alice-app' }).getByRole('cell', { name: 'Team budget', exact: true }).count()).toBe(1);
    await shoot('keys');

    await panel.getByRole('button', { name: 'Done' }).click();
    expect(await page.content()).not.toContain(secret);
    // shown once: back on the page, only the prefix is there
    await go('Users');
    await go('Keys');
    expect(await page.content()).not.toContain(secret);
    await page.getByRole('cell', { name: `${stored.key_prefix}…` }).waitFor();
    // the key's owner and budget by name
    const keyRow = page.getByRole('row').filter({ hasText: 'alice-app' });
    expect((await keyRow.locator('td').allTextContents()).slice(2, 4)).toEqual([HOSTILE_ALIAS, 'Team budget']);
    expect(await page.locator('img').count()).toBe(0);

    // a plainer name for the rest of the test (and the screenshots), set through the user's Edit form
    await go('Users');
    const aliceActions = page.getByRole('group', { name: 'Actions for alice' });
    await aliceActions.getByText('Edit').click();
    await aliceActions.getByLabel('Name').fill(ALICE);
    await aliceActions.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('cell', { name: ALICE, exact: true }).waitFor();
  });

  it('shows calls made with the key in the Overview charts and the Usage table (by name, with route, attempts and reason), and their CSV', async () => {
    for (let i = 0; i < KEY_CALLS - 1; i++) expect((await chat(secret)).status).toBe(200);
    // through the route: its first target fails, the second answers
    fake.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.serverError);
    expect((await chat(secret, ROUTE)).status).toBe(200);
    fake.script(PROVIDER_CHAT_ROUTE, PROVIDER_FAILURES.serverError);
    expect((await chat(secret)).status).toBe(502);

    await go('Overview');
    const requests = page.getByRole('figure').filter({ has: page.getByRole('img', { name: 'Requests (per hour)' }) });
    const columnTotals = await requests.locator('g.column').evaluateAll((columns) => columns.map((column) => Number(column.getAttribute('data-total'))));
    expect(columnTotals).toHaveLength(24);
    expect(columnTotals.reduce((a, b) => a + b, 0)).toBe(SEEDED + KEY_CALLS + KEY_FAILURES);
    // the live calls are in the last column (the current hour), with the failure counted as such
    expect(columnTotals.at(-1)).toBe(KEY_CALLS + KEY_FAILURES);
    expect(await requests.locator('g.column title').last().textContent()).toContain(`Succeeded: ${KEY_CALLS}, Failed, cancelled or refused: ${KEY_FAILURES}`);
    const tiles = await page.locator('.tile').allTextContents();
    expect(tiles.find((text) => text.startsWith('Requests'))).toContain(String(SEEDED + KEY_CALLS + KEY_FAILURES));
    expect(tiles.find((text) => text.startsWith('Error rate'))).toContain(`${((SEEDED_ERRORS + KEY_FAILURES) / (SEEDED + KEY_CALLS + KEY_FAILURES)) * 100}`.slice(0, 3));
    const byUser = page.getByRole('img', { name: 'Spend by user (US$)' });
    // users by name; bob made calls but is no user record: his id stands in
    expect(await byUser.locator('title').allTextContents()).toEqual(expect.arrayContaining([expect.stringMatching(new RegExp(`^${ALICE}: \\$0\\.0\\d+ \\(4 requests\\)$`)), expect.stringMatching(/^bob: /)]));
    // models are labelled provider:model, as the usage table shows them and its model filter takes them
    const byModel = page.getByRole('img', { name: 'Spend by model (US$)' });
    expect((await byModel.locator('title').allTextContents()).map((title) => title.split(':').slice(0, 2).join(':')).sort()).toEqual(['openai:fake-model-1', 'openai:fake-model-2']);
    // the key's budget: its spend against $1
    const near = page.locator('table').filter({ hasText: 'alice-app' });
    expect(await near.locator('meter').getAttribute('max')).toBe('1');

    await go('Usage');
    const filter = page.getByRole('form', { name: 'Filter usage' });
    await filter.getByLabel('Key').selectOption({ label: 'alice-app' });
    await filter.getByRole('button', { name: 'Apply' }).click();
    const rows = page.locator('table.usage tbody tr');
    await expect.poll(() => rows.count()).toBe(KEY_CALLS + KEY_FAILURES);
    const headers = await page.locator('table.usage thead th').allTextContents();
    const column = (name: string) => headers.indexOf(name);
    expect(['User', 'Key', 'Model', 'Route', 'Attempts', 'Status', 'Reason'].every((name) => column(name) >= 0)).toBe(true);
    const cells = await rows.evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(cells.every((row) => row[column('User')] === ALICE && row[column('Key')] === 'alice-app' && row[column('Model')] === 'openai:fake-model-1')).toBe(true);
    expect(cells.map((row) => row[column('Status')]).sort()).toEqual(['error (502)', 'success (200)', 'success (200)', 'success (200)']);
    // the fallback is visible: the route called, two targets tried, the one that answered
    const viaRoute = cells.filter((row) => row[column('Route')] === ROUTE);
    expect(viaRoute.map((row) => [row[column('Attempts')], row[column('Status')], row[column('Reason')]])).toEqual([['2: fell back', 'success (200)', '—']]);
    expect(cells.filter((row) => row[column('Route')] === '—').map((row) => row[column('Attempts')])).toEqual(['1', '1', '1']);
    expect(await page.locator('table.usage tr.fell-back').count()).toBe(1);
    // and why the failed call failed
    expect(cells.find((row) => row[column('Status')] === 'error (502)')![column('Reason')]).toMatch(/^upstream_/);
    await shoot('usage');

    const [download] = await Promise.all([page.waitForEvent('download'), filter.getByRole('button', { name: 'Download CSV' }).click()]);
    expect(download.suggestedFilename()).toBe('usage.csv');
    const csv = (await (await download.createReadStream()).toArray()).join('');
    const lines = csv.trim().split('\r\n');
    expect(lines[0]).toMatch(/^id,request_id,created_at,user_id,key_id,/);
    expect(lines.slice(1)).toHaveLength(KEY_CALLS + KEY_FAILURES);
    expect(lines.slice(1).every((line) => line.includes(',alice,'))).toBe(true);

    // the model filter takes the label the table shows
    await filter.getByLabel('Key').selectOption({ label: 'any key' });
    await filter.getByLabel('Model').fill('openai:fake-model-2');
    await filter.getByRole('button', { name: 'Apply' }).click();
    const seededOfModel2 = Array.from({ length: SEEDED }, (_, i) => i).filter((i) => i % 3 === 0).length;
    await expect.poll(() => rows.count()).toBe(seededOfModel2);
    const models = await rows.evaluateAll((trs, at) => trs.map((tr) => tr.querySelectorAll('td')[at]?.textContent), column('Model'));
    expect(new Set(models)).toEqual(new Set(['openai:fake-model-2']));
    await filter.getByLabel('Model').fill('');
    await filter.getByRole('button', { name: 'Apply' }).click();
  });

  it('shows a call held open by a slow provider in the Live view while it runs (read every 2 s), and drops it once it ends', async () => {
    await go('Live');
    await page.getByText('No call is in flight.').waitFor();
    // the route's first target answers after a minute; the client gives up first
    fake.script(PROVIDER_CHAT_ROUTE, { delayMs: 60_000, then: PROVIDER_FAILURES.serverError });
    const client = new AbortController();
    const held = chat(secret, ROUTE, client.signal).catch((error: unknown) => error);
    // the page shows it without being asked: its next read finds it
    const row = page.locator('table.live tbody tr').filter({ hasText: 'alice-app' });
    await row.waitFor({ timeout: 10_000 });
    const headers = await page.locator('table.live thead th').allTextContents();
    const cells = await row.locator('td').allTextContents();
    const cell = (name: string) => cells[headers.indexOf(name)];
    expect([cell('User'), cell('Key'), cell('Model'), cell('Endpoint')]).toEqual([ALICE, 'alice-app', `${ROUTE} → openai:fake-model-2`, 'chat.completions']);
    expect(cell('Running for')).toMatch(/^\d+ (ms|s)$/);
    expect(cell('Held')).toMatch(/^\$0\.\d+$/);
    expect(await page.locator('.live-status').textContent()).toMatch(/^1 call in flight · read at \d\d:\d\d:\d\d UTC$/);
    const [inFlight] = (await gateway.call('GET', '/v1/usage/in-flight')).json.data;
    expect(cell('Request id')).toBe(inFlight.request_id);
    expect(await accessibilityViolations(page)).toEqual([]);
    await shoot('live');

    // paused, the page keeps what it showed though the call ends; resumed, it reads again at once
    await page.getByRole('button', { name: 'Pause updates' }).click();
    expect(await page.locator('.live-status').textContent()).toMatch(/ · updates paused$/);
    client.abort();
    expect(await held).toBeInstanceOf(Error);
    await expect.poll(async () => (await gateway.call('GET', '/v1/usage/in-flight')).json.data.length).toBe(0);
    await page.waitForTimeout(2_500);
    expect(await row.count()).toBe(1);
    await page.getByRole('button', { name: 'Resume updates' }).click();
    await page.getByText('No call is in flight.').waitFor({ timeout: 10_000 });

    // a read that fails is shown, and the next one that succeeds clears it; the page keeps reading meanwhile
    const failure = { error: { message: 'database is locked', type: 'api_error', code: 'internal_error', param: null } };
    await page.route('**/v1/usage/in-flight*', (route) => route.fulfill({ status: 500, headers: { 'content-type': 'application/json' }, body: JSON.stringify(failure) }));
    const alert = page.getByRole('alert').filter({ hasText: 'The gateway answered 500 (internal_error): database is locked' });
    await alert.waitFor({ timeout: 10_000 });
    await page.unroute('**/v1/usage/in-flight*');
    await alert.waitFor({ state: 'detached', timeout: 10_000 });

    // A key made after the page read the names: its call is shown by name (the names are read again). A key deleted
    // before the page saw its call: shown by its id, and the names are read again once for it, not at every read.
    // (Updates are paused while the calls start, so that the page sees each as the test means it to.)
    const pauseUpdates = () => page.getByRole('button', { name: 'Pause updates' }).click();
    const resumeUpdates = () => page.getByRole('button', { name: 'Resume updates' }).click();
    const heldCall = async (keyName: string) => {
      const key = (await gateway.call('POST', '/v1/keys', { body: { key_name: keyName } })).json as { id: string; key: string };
      fake.script(PROVIDER_CHAT_ROUTE, { delayMs: 60_000, then: PROVIDER_FAILURES.serverError });
      const client = new AbortController();
      const call = chat(key.key, 'openai:fake-model-1', client.signal).catch((error: unknown) => error);
      await expect.poll(async () => (await gateway.call('GET', '/v1/usage/in-flight')).json.data.some((entry: { key_id: string }) => entry.key_id === key.id)).toBe(true);
      return { id: key.id, end: async () => (client.abort(), call) };
    };
    await pauseUpdates();
    const late = await heldCall('late-key');
    await resumeUpdates();
    await page.locator('table.live tbody tr').filter({ hasText: 'late-key' }).waitFor({ timeout: 10_000 });
    await pauseUpdates();
    const gone = await heldCall('gone-key');
    expect((await gateway.call('DELETE', `/v1/keys/${gone.id}`)).status).toBe(200);
    await resumeUpdates();
    await page.locator('table.live tbody tr').filter({ hasText: gone.id }).waitFor({ timeout: 10_000 });
    let keyReads = 0;
    const countKeyReads = (request: { url(): string }) => {
      if (new URL(request.url()).pathname === '/v1/keys') keyReads++;
    };
    page.on('request', countKeyReads);
    const readAt = () => page.locator('.live-status').textContent();
    for (let read = 0; read < 2; read++) {
      const before = await readAt();
      await expect.poll(readAt, { timeout: 10_000 }).not.toBe(before);
    }
    page.off('request', countKeyReads);
    expect(keyReads).toBe(0);
    expect(await late.end()).toBeInstanceOf(Error);
    expect(await gone.end()).toBeInstanceOf(Error);
    await gateway.call('DELETE', `/v1/keys/${late.id}`);
    await page.getByText('No call is in flight.').waitFor({ timeout: 10_000 });
    expect((await gateway.call('GET', '/v1/usage/in-flight')).json.data).toEqual([]);
    await expect.poll(() => fake.abandonedReplies).toBe(3);
  });

  it('warns of an overspent budget on the Budgets page and the Overview; its next call is refused and the Usage table says why', async () => {
    const { spend } = (await gateway.call('GET', `/v1/budgets/${budgetId}`)).json as { spend: number };
    expect(spend).toBeGreaterThan(0);
    const limit = Math.floor((spend / 2) * 1e4) / 1e4;
    await go('Budgets');
    expect(await page.locator('.badge').count()).toBe(0);
    // the limit lowered below what was spent, through the budget's Edit form
    const actions = page.getByRole('group', { name: 'Actions for Team budget' });
    await actions.getByText('Edit').click();
    await actions.getByLabel('Limit (US$)').fill(String(limit));
    await actions.getByRole('button', { name: 'Save' }).click();
    const badge = page.getByRole('row').filter({ hasText: 'Team budget' }).locator('.badge.bad');
    await badge.waitFor();
    expect(await badge.textContent()).toMatch(/^Overspent by \$0\.\d+$/);
    expect(await page.locator('.banner.warn').textContent()).toContain('1 budget is overspent: Team budget (');

    await go('Overview');
    const banner = page.locator('.banner.warn');
    expect(await banner.textContent()).toContain('1 budget is overspent');
    expect(await page.locator('table').filter({ hasText: 'alice-app' }).locator('.badge.bad').textContent()).toMatch(/^Overspent by /);
    await shoot('overview');

    const refused = await chat(secret);
    expect(refused.status).toBe(403);
    expect(refused.json.error?.code).toBe('budget_exceeded');
    await go('Usage');
    const headers = await page.locator('table.usage thead th').allTextContents();
    const newest = await page.locator('table.usage tbody tr').first().locator('td').allTextContents();
    expect([newest[headers.indexOf('Key')], newest[headers.indexOf('Status')], newest[headers.indexOf('Reason')]]).toEqual(['alice-app', 'refused (403)', 'budget_exceeded']);
    // back from the Overview's warning to the Budgets page
    await go('Overview');
    await banner.getByRole('link', { name: 'See Budgets' }).click();
    await page.getByRole('heading', { level: 1, name: 'Budgets' }).waitFor();
  });

  it('deactivates the key, after which the gateway refuses its next call', async () => {
    await go('Keys');
    const actions = page.getByLabel('Actions for alice-app');
    await actions.getByRole('button', { name: 'Deactivate' }).click();
    await page.getByLabel('Actions for alice-app').getByRole('button', { name: 'Activate' }).waitFor();
    await page.getByRole('cell', { name: 'inactive', exact: true }).waitFor();
    const refused = await chat(secret);
    expect(refused.status).toBe(401);
    expect(refused.json.error?.code).toBe('key_inactive');
  });

  it('deletes a key after asking (the dialog is accepted), and it is gone from the list and the gateway', async () => {
    const spare = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'spare-key' } })).json as { id: string; key: string };
    // the page shows Keys already: away and back, so that it reads the list again
    await go('Users');
    await go('Keys');
    await page.getByLabel('Actions for spare-key').getByRole('button', { name: 'Delete' }).click();
    await page.getByLabel('Actions for spare-key').waitFor({ state: 'detached' });
    expect((await gateway.call('GET', `/v1/keys/${spare.id}`)).status).toBe(404);
    expect((await chat(spare.key)).status).toBe(401);
  });

  it('shows the Users, Budgets and Models pages', async () => {
    await go('Users');
    await page.getByRole('cell', { name: 'alice', exact: true }).waitFor();
    await shoot('users');
    // overspent wins over a soft limit passed; with the limit raised again, the soft limit's badge shows
    await gateway.call('PATCH', `/v1/budgets/${budgetId}`, { body: { soft_budget: 0.000001 } });
    await go('Budgets');
    const budgetRow = page.getByRole('row').filter({ hasText: 'Team budget' });
    expect(await budgetRow.locator('.badge').allTextContents()).toEqual([expect.stringMatching(/^Overspent by /)]);
    await gateway.call('PATCH', `/v1/budgets/${budgetId}`, { body: { max_budget: 1 } });
    await go('Users');
    await go('Budgets');
    expect(await page.locator('meter').count()).toBe(1);
    expect(await budgetRow.locator('.badge').allTextContents()).toEqual(['Past soft limit $0.000001']);
    await shoot('budgets');
    await go('Models');
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'openai:fake-model-1', exact: true }) });
    expect(await row.locator('td').allTextContents()).toEqual(['openai:fake-model-1', 'openai', 'direct', '$1,000', '$2,000', 'provider, pricing']);
    await page.getByRole('row').filter({ hasText: 'openai:fake-embedder' }).waitFor();
    await shoot('models');
  });

  it('sets a budget calendar reset in a time zone; a zone the API does not know is shown at its field', async () => {
    await go('Budgets');
    const form = page.getByRole('form', { name: 'Create a budget' });
    await form.getByLabel('Name').fill('Paris budget');
    await form.getByLabel('Limit (US$)').fill('5');
    await form.getByLabel('Starts again').selectOption({ label: 'monthly, on the 1st at midnight' });
    const zone = form.getByLabel('Time zone');
    await zone.fill('Mars/Olympus_Mons');
    await form.getByRole('button', { name: 'Create budget' }).click();
    await expect(fieldError(form)).resolves.toContain('unknown time zone "Mars/Olympus_Mons"');
    expect(await zone.getAttribute('aria-invalid')).toBe('true');
    expect(await page.getByRole('alert').count()).toBe(0);
    await zone.fill('Europe/Paris');
    await form.getByRole('button', { name: 'Create budget' }).click();
    await page.getByRole('row').filter({ hasText: 'Paris budget' }).getByRole('cell', { name: 'monthly (Europe/Paris)' }).waitFor();
    const created = (await gateway.call('GET', '/v1/budgets')).json.data.find((budget: { name: string }) => budget.name === 'Paris budget');
    expect(created).toMatchObject({ reset_alignment: 'monthly', reset_time_zone: 'Europe/Paris', max_budget: 5 });
  });

  it('edits prices from the dashboard: the next call is billed at the new price; a bad model name is shown at its field', async () => {
    configKey = (await gateway.call('POST', '/v1/keys', { body: { key_name: 'config-test' } })).json.key as string;
    expect((await chat(configKey)).status).toBe(200);
    expect(await newestCost()).toBeCloseTo(CHAT_COST, 9);

    await go('Pricing');
    // a new price: first without its provider (the API's 400 lands on the Model field), then right
    const form = page.getByRole('form', { name: 'Set a price' });
    const model = form.getByLabel('Model');
    await model.fill('fake-model-3');
    await form.getByLabel('Input (US$ per 1M tokens)').fill('10');
    await form.getByLabel('Output (US$ per 1M tokens)').fill('20');
    await form.getByRole('button', { name: 'Set price' }).click();
    await expect(fieldError(form)).resolves.toContain('Pricing is per provider:model');
    expect(await model.getAttribute('aria-invalid')).toBe('true');
    expect(await focusedName()).toBe('model');
    await model.fill('openai:fake-model-3');
    await form.getByRole('button', { name: 'Set price' }).click();
    await page.getByRole('group', { name: 'Actions for openai:fake-model-3' }).waitFor();
    expect((await gateway.call('GET', '/v1/pricing/openai:fake-model-3')).json).toMatchObject({ input_cost_per_million: 10, output_cost_per_million: 20, source: 'api' });

    // an existing price changed through its row's Edit form
    const actions = page.getByRole('group', { name: 'Actions for openai:fake-model-1' });
    await actions.getByText('Edit').click();
    await actions.getByLabel('Input (US$ per 1M tokens)').fill('500');
    await actions.getByLabel('Output (US$ per 1M tokens)').fill('100');
    await actions.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('row').filter({ hasText: 'openai:fake-model-1' }).getByRole('cell', { name: '$500', exact: true }).waitFor();
    expect((await chat(configKey)).status).toBe(200);
    expect(await newestCost()).toBeCloseTo((CHAT_USAGE.prompt_tokens * 500 + CHAT_USAGE.completion_tokens * 100) / 1e6, 9);
    await shoot('pricing');
  });

  it('edits a route from the dashboard: the next call goes to the new target; a bad target is shown at its field', async () => {
    await go('Routes');
    const actions = page.getByRole('group', { name: `Actions for ${ROUTE}` });
    await actions.getByText('Edit').click();
    const form = page.getByRole('form', { name: `Edit route ${ROUTE}` });
    const first = form.getByRole('group', { name: 'Target 1' }).getByLabel('Model');
    expect(await first.inputValue()).toBe('openai:fake-model-2');
    await first.fill('fake-model-3');
    await form.getByRole('button', { name: 'Save route' }).click();
    await expect(fieldError(form)).resolves.toMatch(/provider:model/);
    expect(await first.getAttribute('aria-invalid')).toBe('true');
    await shoot('routes-editing');
    // fixed, the second target removed (by keyboard) and a default timeout set
    await first.fill('openai:fake-model-3');
    await form.getByRole('button', { name: 'Remove target 2' }).focus();
    await page.keyboard.press('Enter');
    expect(await form.getByRole('group', { name: /^Target / }).count()).toBe(1);
    await form.getByLabel('Default timeout (s)').fill('30');
    await form.getByRole('button', { name: 'Save route' }).click();
    await page.getByRole('region', { name: `Targets of ${ROUTE}` }).getByRole('cell', { name: 'openai:fake-model-3' }).waitFor();
    expect((await gateway.call('GET', `/v1/routes/${ROUTE}`)).json).toMatchObject({ targets: [{ model: 'openai:fake-model-3', api_key_set: false }], timeout_seconds: 30, source: 'api' });

    const seen = fake.requestsTo(PROVIDER_CHAT_ROUTE).length;
    expect((await chat(configKey, ROUTE)).status).toBe(200);
    const sent = fake.requestsTo(PROVIDER_CHAT_ROUTE).slice(seen);
    expect(sent.map((request) => (request.body as { model: string }).model)).toEqual(['fake-model-3']);
    // and billed at the price set on the Pricing page
    expect(await newestCost()).toBeCloseTo((CHAT_USAGE.prompt_tokens * 10 + CHAT_USAGE.completion_tokens * 20) / 1e6, 9);

    // a new route, with two targets in fallback order
    const add = page.getByRole('form', { name: 'Add a route' });
    await page.getByText('Add a route', { exact: true }).first().click();
    await add.getByLabel('Name').fill('cheap');
    await add.getByRole('group', { name: 'Target 1' }).getByLabel('Model').fill('openai:fake-model-1');
    await add.getByRole('button', { name: 'Add a target' }).click();
    await add.getByRole('group', { name: 'Target 2' }).getByLabel('Model').fill('openai:fake-model-3');
    await add.getByRole('button', { name: 'Add a target' }).click();
    await add.getByRole('group', { name: 'Target 3' }).getByLabel('Model').fill('openai:fake-model-2');
    // the third moved up by keyboard: it is tried second
    expect(await add.getByRole('button', { name: 'Move up target 1' }).isDisabled()).toBe(true);
    await add.getByRole('button', { name: 'Move up target 3' }).focus();
    await page.keyboard.press('Enter');
    expect(await add.getByRole('group', { name: 'Target 2' }).getByLabel('Model').inputValue()).toBe('openai:fake-model-2');
    // focus stays on the button, now the second target's
    expect(await page.evaluate('document.activeElement.getAttribute("aria-label")')).toBe('Move up target 2');
    await add.getByRole('button', { name: 'Add route' }).click();
    await page.getByRole('group', { name: 'Actions for cheap' }).waitFor();
    const cheap = (await gateway.call('GET', '/v1/routes/cheap')).json as { targets: { model: string }[] };
    expect(cheap.targets.map((target) => target.model)).toEqual(['openai:fake-model-1', 'openai:fake-model-2', 'openai:fake-model-3']);
    await shoot('routes');
    await page.getByRole('group', { name: 'Actions for cheap' }).getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('group', { name: 'Actions for cheap' }).waitFor({ state: 'detached' });
    expect((await gateway.call('GET', '/v1/routes/cheap')).status).toBe(404);
  });

  it("keeps a route target's own key when the route is edited; a refusal about a field the form lacks is shown above the page", async () => {
    const keyed = 'keyed';
    expect((await gateway.call('PUT', `/v1/routes/${keyed}`, { body: { targets: [{ model: 'openai:fake-model-1', api_key: 'sk-target-secret' }] } })).status).toBe(200);
    await go('Users');
    await go('Routes');
    const actions = page.getByRole('group', { name: `Actions for ${keyed}` });
    await actions.getByText('Edit').click();
    const form = page.getByRole('form', { name: `Edit route ${keyed}` });
    expect(await form.getByText('Keeps its own key.').count()).toBe(1);
    expect(await page.content()).not.toContain('sk-target-secret');
    // saved with another timeout: the key stays
    await form.getByLabel('Default timeout (s)').fill('20');
    await form.getByRole('button', { name: 'Save route' }).click();
    await page.getByRole('region', { name: `Route ${keyed}` }).getByText(/^timeout 20 s/).waitFor();
    expect((await gateway.call('GET', `/v1/routes/${keyed}`)).json).toMatchObject({ targets: [{ model: 'openai:fake-model-1', api_key_set: true }], timeout_seconds: 20 });
    // another model: the stored key belongs to the old one, and the API names a field the page does not show
    await page.getByRole('group', { name: `Actions for ${keyed}` }).getByText('Edit').click();
    await form.getByRole('group', { name: 'Target 1' }).getByLabel('Model').fill('openai:fake-model-2');
    await form.getByRole('button', { name: 'Save route' }).click();
    await expect(page.getByRole('alert').textContent({ timeout: 10_000 })).resolves.toMatch(/^The gateway answered 400 \(invalid_request\): targets\.0\.api_key_set/);
    expect(await form.locator('.field-error').count()).toBe(0);
    expect((await gateway.call('GET', `/v1/routes/${keyed}`)).json.targets).toEqual([{ model: 'openai:fake-model-1', api_key_set: true }]);
    expect((await gateway.call('DELETE', `/v1/routes/${keyed}`)).status).toBe(200);
    await go('Users');
  });

  it('adds a provider, sets and clears its base address and key (never shown), and deletes it; the API\'s refusals are shown at their fields', async () => {
    await go('Providers');
    const form = page.getByRole('form', { name: 'Add a provider' });
    await form.getByLabel('Name').fill('nosuchprovider');
    await form.getByRole('button', { name: 'Add provider' }).click();
    await expect(fieldError(form)).resolves.toContain('nosuchprovider');
    expect(await form.getByLabel('Name').getAttribute('aria-invalid')).toBe('true');
    await form.getByLabel('Name').fill('mistral');
    await form.getByLabel('Base address').fill('not an address');
    await form.getByRole('button', { name: 'Add provider' }).click();
    await expect(fieldError(form)).resolves.toMatch(/^api_base/);
    expect(await form.getByLabel('Name').getAttribute('aria-invalid')).toBeNull();
    expect(await form.getByLabel('Base address').getAttribute('aria-invalid')).toBe('true');
    await form.getByLabel('Base address').fill('http://127.0.0.1:9/v1');
    await form.getByLabel('API key').fill('sk-mistral-secret');
    await form.getByRole('button', { name: 'Add provider' }).click();
    const row = page.getByRole('row').filter({ hasText: 'mistral' });
    await row.getByRole('cell', { name: 'set', exact: true }).waitFor();
    expect(await page.content()).not.toContain('sk-mistral-secret');
    expect((await gateway.call('GET', '/v1/providers/mistral')).json).toMatchObject({ api_base: 'http://127.0.0.1:9/v1', api_key_set: true, source: 'api' });
    await shoot('providers');

    const actions = page.getByRole('group', { name: 'Actions for mistral' });
    await actions.getByText('Edit').click();
    await actions.getByLabel('Base address').fill('');
    await actions.getByLabel('Stored key').selectOption('remove');
    await actions.getByRole('button', { name: 'Save' }).click();
    await row.getByRole('cell', { name: 'not set', exact: true }).waitFor();
    expect((await gateway.call('GET', '/v1/providers/mistral')).json).toMatchObject({ api_base: null, api_key_set: false });
    await page.getByRole('group', { name: 'Actions for mistral' }).getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('group', { name: 'Actions for mistral' }).waitFor({ state: 'detached' });
    expect((await gateway.call('GET', '/v1/providers/mistral')).status).toBe(404);
  });

  it('passes axe-core on every page (no serious or critical violation); a skip link takes the keyboard past the navigation, with focus shown', async () => {
    const names = await pageNames(page);
    expect(names).toEqual(['Overview', 'Live', 'Keys', 'Users', 'Budgets', 'Usage', 'Models', 'Pricing', 'Routes', 'Providers']);
    for (const name of names) {
      await go(name);
      expect(await accessibilityViolations(page), name).toEqual([]);
    }
    // the forms folded into the tables' rows and the route cards too, and a field error as it is shown
    for (const name of ['Keys', 'Budgets', 'Pricing', 'Routes', 'Providers']) {
      await go(name);
      for (const summary of await page.locator('summary').all()) await summary.click();
      expect(await accessibilityViolations(page), `${name} with every form open`).toEqual([]);
    }
    await go('Routes');
    await page.getByRole('group', { name: `Actions for ${ROUTE}` }).getByText('Edit').click();
    const routeForm = page.getByRole('form', { name: `Edit route ${ROUTE}` });
    await routeForm.getByRole('group', { name: 'Target 1' }).getByLabel('Weight').fill('2');
    await routeForm.getByRole('button', { name: 'Save route' }).click();
    await expect(fieldError(routeForm)).resolves.toContain('weight');
    expect(await routeForm.getByRole('group', { name: 'Target 1' }).getByLabel('Weight').getAttribute('aria-invalid')).toBe('true');
    expect(await accessibilityViolations(page), 'Routes with a field error').toEqual([]);
    await go('Keys');

    // from the top of the page, Tab reaches the skip link first; it is shown, with a focus ring
    await page.evaluate("document.body.tabIndex = -1; document.body.focus(); document.body.removeAttribute('tabindex')");
    await page.keyboard.press('Tab');
    const skip = await focused(page);
    expect(skip).toMatchObject({ text: 'Skip to content', tag: 'A' });
    expect(skip.outline).not.toBe('none');
    expect(skip.outlineWidth).toBeGreaterThanOrEqual(2);
    expect(skip.top).toBeGreaterThanOrEqual(0);
    await page.keyboard.press('Enter');
    expect(await focused(page)).toMatchObject({ id: 'main-content' });
    expect(new URL(page.url()).hash).toBe('#/keys');
    await page.keyboard.press('Tab');
    expect((await focused(page)).inNav).toBe(false);
    // following a link by keyboard lands on the new page's heading
    await page.getByRole('link', { name: 'Users', exact: true }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Users' }).waitFor();
    await expect.poll(async () => (await focused(page)).tag).toBe('H1');
  });

  it('at 390 px: the navigation folds behind a Menu button, no page scrolls sideways, and every page passes axe-core', async () => {
    const phone = await browser.newContext({ viewport: PHONE });
    try {
      const small = await phone.newPage();
      small.on('pageerror', (error) => pageErrors.push(error.message));
      small.on('console', (message) => {
        if (message.type() === 'error' && /Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
      });
      await small.goto(`${gateway.url}/dashboard/`);
      await small.getByLabel('Master key').fill(MASTER_KEY);
      expect(await sidewaysScroll(small)).toBeLessThanOrEqual(0);
      expect(await accessibilityViolations(small)).toEqual([]);
      await shoot('sign-in-390', small);
      await small.getByRole('button', { name: 'Sign in' }).click();
      await small.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();

      const menu = small.getByRole('button', { name: 'Menu' });
      const names = await pageNames(small);
      expect(names).toEqual(await pageNames(page));
      for (const name of names) {
        // folded: a bar across the top, its links hidden until the menu opens
        expect(await small.getByRole('link', { name, exact: true }).isVisible(), name).toBe(false);
        const bar = (await small.locator('nav').boundingBox())!;
        expect(bar.width).toBeLessThanOrEqual(PHONE.width);
        expect(bar.height).toBeLessThan(PHONE.height / 10);
        await menu.click();
        expect(await menu.getAttribute('aria-expanded')).toBe('true');
        await go(name, small);
        expect(await menu.getAttribute('aria-expanded')).toBe('false');
        expect(await sidewaysScroll(small), name).toBeLessThanOrEqual(0);
        expect(await accessibilityViolations(small), name).toEqual([]);
        await shoot(`${name.toLowerCase()}-390`, small);
      }
      // the editors open: still no sideways scroll
      for (const name of ['Budgets', 'Pricing', 'Routes', 'Providers']) {
        await small.getByRole('button', { name: 'Menu' }).click();
        await go(name, small);
        for (const summary of await small.locator('summary').all()) await summary.click();
        expect(await sidewaysScroll(small), `${name} with every form open`).toBeLessThanOrEqual(0);
        if (name === 'Routes') await shoot('routes-390-editing', small);
      }
      // Escape folds an open menu and gives focus back to its button
      await menu.click();
      await small.keyboard.press('Tab');
      await small.keyboard.press('Escape');
      expect(await menu.getAttribute('aria-expanded')).toBe('false');
      expect((await focused(small)).text).toBe('Menu');
    } finally {
      await phone.close();
    }
  });

  it('shows a 500 from the API, on a page and after an action, instead of swallowing it', async () => {
    const failure = { error: { message: 'database disk image is malformed', type: 'api_error', code: 'internal_error', param: null } };
    const answer500 = { status: 500, headers: { 'content-type': 'application/json', 'x-request-id': 'req-test-500' }, body: JSON.stringify(failure) };
    await page.route('**/v1/users', (route) => route.fulfill(answer500));
    await page.getByRole('link', { name: 'Users', exact: true }).click();
    const alert = page.getByRole('alert');
    await expect(alert.textContent({ timeout: 10_000 })).resolves.toBe(
      'The gateway answered 500 (internal_error): database disk image is malformed — request id req-test-500',
    );
    await page.unroute('**/v1/users');

    await go('Budgets');
    await page.route('**/v1/budgets', (route) => (route.request().method() === 'POST' ? route.fulfill(answer500) : route.continue()));
    const budgetForm = page.getByRole('form', { name: 'Create a budget' });
    await budgetForm.getByLabel('Limit (US$)').fill('5');
    await budgetForm.getByRole('button', { name: 'Create budget' }).click();
    await expect(page.getByRole('alert').textContent({ timeout: 10_000 })).resolves.toContain('The gateway answered 500 (internal_error)');
    await page.unroute('**/v1/budgets');
    // the form is still there to try again
    expect(await budgetForm.getByLabel('Limit (US$)').inputValue()).toBe('5');
  });

  it('returns to sign-in when the session ends (the gateway no longer accepts the key)', async () => {
    const port = Number(new URL(gateway.url).port);
    await gateway.close();
    gateway = await startGatewayOn(port, 'another-master-key-0123456789abcdefghijkl');
    await page.getByRole('link', { name: 'Keys', exact: true }).click();
    // the alert of the test before may still be up: wait for this one's words rather than read whatever is there
    const ended = page.getByRole('alert').filter({ hasText: /^Your session has ended: the gateway no longer accepts the key/ });
    await ended.waitFor({ timeout: 10_000 });
    await page.getByLabel('Master key').waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  });

  it('ran without a CSP violation or an uncaught error', () => {
    expect(cspViolations).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
