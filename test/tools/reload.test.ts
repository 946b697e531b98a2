import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseToolsConfig } from '../../src/tools/config.ts';
import { EVERYTHING, NODE, OpenApiChecker, eventually, isAlive, startHarness, type ToolsHarness } from './helpers.ts';

// A reload (SIGHUP's Upstreams.apply) while calls are under way: a server the reload changes or removes finishes
// them on its old session before that session and process are closed. The calls are server-everything's real
// trigger-long-running-operation, which answers after the duration it is given: 5 s, longer than the 2 s the SDK's
// stdio transport gives a process between closing its stdin and SIGTERM.

const entry = (request: string) => `{command: ${NODE}, args: [${EVERYTHING}, stdio], timeouts: {request: ${request}}}`;
const configOf = (servers: Record<string, string>) =>
  parseToolsConfig(`servers:\n${Object.entries(servers).map(([name, value]) => `  ${name}: ${value}`).join('\n')}\n`, 'test.yaml');

let harness: ToolsHarness;
let api: OpenApiChecker;

beforeAll(async () => {
  harness = await startHarness(`servers:\n  changed: ${entry('60s')}\n  removed: ${entry('60s')}\n`);
  await Promise.all(harness.upstreams.all().map((upstream) => upstream.waitConnected(60_000)));
  // the tool lists are fetched after connecting: wait for them so that the calls below go straight to the server
  for (const name of ['changed', 'removed']) expect((await harness.app.inject(`/api/v1/servers/${name}/tools`)).statusCode).toBe(200);
  api = await OpenApiChecker.of(harness.app);
});

afterAll(async () => {
  await harness?.close();
});

describe('a reload while calls are under way', () => {
  it('lets a changed or removed server finish its calls, then stops its old process', async () => {
    const oldPids = ['changed', 'removed'].map((name) => harness.upstreams.get(name).pid!);
    const calls = ['changed', 'removed'].map((name) =>
      harness.app.inject({
        method: 'POST',
        url: `/api/v1/servers/${name}/tools/trigger-long-running-operation`,
        headers: { 'content-type': 'application/json' },
        payload: '{"duration": 5, "steps": 1}',
      }),
    );
    for (const name of ['changed', 'removed']) await eventually(() => expect(harness.upstreams.get(name).requestsUnderWay).toBe(1));
    const summary = harness.upstreams.apply(configOf({ changed: entry('59s') }));
    expect(summary).toEqual({ added: [], removed: ['removed'], restarted: ['changed'], updated: [], unchanged: [] });
    for (const response of await Promise.all(calls)) {
      api.check('POST', '/api/v1/servers/{server}/tools/{tool}', response);
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toContain('Long running operation completed');
    }
    await harness.upstreams.get('changed').waitConnected(60_000);
    expect(harness.upstreams.get('changed').pid).not.toBe(oldPids[0]);
    for (const pid of oldPids) await eventually(() => expect(isAlive(pid)).toBe(false));
  });
});
