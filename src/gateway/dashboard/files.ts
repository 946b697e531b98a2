/**
 * The dashboard's files (GET /dashboard/…): a page, one script bundled by esbuild from page/, one stylesheet. They come
 * from whoever runs the program — from source, bundled on demand (bundle.ts); in the single executable, SEA assets
 * made at build (scripts/build-runtime.ts) — and are served by src/gateway/http/dashboard-routes.ts.
 */
export const DASHBOARD_FILES = ['index.html', 'dashboard.js', 'dashboard.css'] as const;
export type DashboardFile = (typeof DASHBOARD_FILES)[number];

/** The content of every dashboard file. */
export type DashboardFiles = Record<DashboardFile, Uint8Array>;

export const DASHBOARD_TYPES: Record<DashboardFile, string> = {
  'index.html': 'text/html; charset=utf-8',
  'dashboard.js': 'text/javascript; charset=utf-8',
  'dashboard.css': 'text/css; charset=utf-8',
};

/** The SEA asset that holds a dashboard file. */
export const dashboardAsset = (file: DashboardFile): string => `dashboard/${file}`;
