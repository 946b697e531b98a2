import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleDashboard } from '../../src/gateway/dashboard/bundle.ts';
import type { DashboardFiles } from '../../src/gateway/dashboard/files.ts';
import { DASHBOARD_CSP } from '../../src/gateway/http/dashboard-routes.ts';
import { sqliteBackend, startTestGateway, type TestGateway } from './helpers/gateway.ts';

// How the gateway serves the dashboard's files (the page itself is tested in a browser: dashboard-browser.test.ts).

const backend = sqliteBackend();
let files: DashboardFiles;
let gateway: TestGateway;

beforeAll(async () => {
  files = await bundleDashboard();
  gateway = await startTestGateway(await backend.newDatabaseUrl(), {}, { dashboard: files });
});
afterAll(async () => {
  await gateway?.close();
  await backend.close();
});

describe('the dashboard files', () => {
  it('are served without a credential, with a strict CSP and no caching without revalidation', async () => {
    for (const [path, file, type] of [
      ['/dashboard/', 'index.html', 'text/html; charset=utf-8'],
      ['/dashboard/dashboard.js', 'dashboard.js', 'text/javascript; charset=utf-8'],
      ['/dashboard/dashboard.css', 'dashboard.css', 'text/css; charset=utf-8'],
    ] as const) {
      const response = await fetch(gateway.url + path);
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-type'), path).toBe(type);
      expect(Buffer.from(await response.arrayBuffer()).equals(Buffer.from(files[file])), path).toBe(true);
      expect(response.headers.get('content-security-policy'), path).toBe(DASHBOARD_CSP);
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('x-frame-options')).toBe('DENY');
      expect(response.headers.get('referrer-policy')).toBe('no-referrer');
      expect(response.headers.get('cache-control')).toBe('no-cache');
      const etag = response.headers.get('etag');
      expect(etag).toMatch(/^"[\w-]+"$/);
      const again = await fetch(gateway.url + path, { headers: { 'if-none-match': etag! } });
      expect(again.status, path).toBe(304);
    }
    expect(DASHBOARD_CSP).toContain("script-src 'self'");
    expect(DASHBOARD_CSP).not.toContain('unsafe');
  });

  it('is a page with no inline script or style, linking only its own files', () => {
    const html = Buffer.from(files['index.html']).toString('utf8');
    const scripts = [...html.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts).toHaveLength(1);
    expect(scripts[0][1]).toContain('src="/dashboard/dashboard.js"');
    expect(scripts[0][2]).toBe('');
    expect(html).not.toMatch(/<style|\sstyle=|\son\w+=|https?:\/\//);
    // the bundle holds no address of another host either (no CDN, works offline)
    expect(Buffer.from(files['dashboard.js']).toString('utf8')).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
  });

  it('redirects /dashboard to /dashboard/ and answers unknown files with the API 404', async () => {
    const redirect = await fetch(`${gateway.url}/dashboard`, { redirect: 'manual' });
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get('location')).toBe('/dashboard/');
    const unknown = await gateway.call('GET', '/dashboard/secret.txt', { key: null });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe('route_not_found');
  });

  it('is absent from a gateway started without it', async () => {
    const bare = await startTestGateway(await backend.newDatabaseUrl());
    try {
      expect((await bare.call('GET', '/dashboard/', { key: null })).status).toBe(404);
    } finally {
      await bare.close();
    }
  });
});
