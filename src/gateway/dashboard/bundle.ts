import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import type { DashboardFiles } from './files.ts';

const pageDir = fileURLToPath(new URL('./page/', import.meta.url));

/**
 * Bundles the dashboard from page/: main.ts and its modules into one minified script (esbuild, in memory), beside the
 * page and stylesheet as they are. From source `gateway serve` calls this at start (about 50 ms); the build of the
 * single executable calls it once and ships the result as SEA assets. esbuild is a development dependency: it is
 * there wherever the program runs from source.
 */
export async function bundleDashboard(): Promise<DashboardFiles> {
  const result = await esbuild.build({
    entryPoints: [`${pageDir}main.ts`],
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    target: ['chrome120', 'firefox120', 'safari17'],
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
    charset: 'utf8',
  });
  return {
    'index.html': readFileSync(`${pageDir}index.html`),
    'dashboard.js': result.outputFiles[0].contents,
    'dashboard.css': readFileSync(`${pageDir}dashboard.css`),
  };
}
