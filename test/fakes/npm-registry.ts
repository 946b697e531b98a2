// A fake npm registry on loopback that offers exactly the packages this repository's package-lock.json installs, at
// those versions, with their tarballs read from the local npm cache (the repository's `npm ci` put them there). It
// lets a test install a package into a fresh project the way a user does — npm resolves every dependency range —
// without any download.
//
// Why not `npm install --offline` against the cache itself: the cache holds the tarballs but only the abbreviated
// metadata documents `npm ci` fetched, while npm 11 resolves new dependencies from full documents, so an offline
// install of a fresh project fails with ENOTCACHED. The documents here are made from the lockfile's entries (name,
// version, dependencies, peers, engines, bin, os/cpu, integrity), which is what npm's resolver reads.
//
//   const registry = await FakeNpmRegistry.start(lockfilePath);
//   npm install --registry registry.url --cache <empty temp folder> ./some.tgz
//   registry.requested                               // names whose metadata npm asked for
//   await registry.close();

import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

interface LockEntry {
  name?: string;
  version?: string;
  integrity?: string;
  link?: boolean;
  [field: string]: unknown;
}

/** Lockfile fields that describe the repository's own install, not the package. */
const INSTALL_FIELDS = ['dev', 'peer', 'optional', 'devOptional', 'inBundle', 'extraneous', 'resolved', 'integrity', 'link', 'license', 'funding'];

/** The npm cache folder npm itself uses (npm passes it to scripts as npm_config_cache). */
export function npmCacheDir(): string {
  return process.env.npm_config_cache ?? path.join(os.homedir(), '.npm');
}

/** The file of the npm cache's content store that holds the data with this integrity, if it is there. */
function cachedContent(cacheDir: string, integrity: string): string | undefined {
  const [algorithm, base64] = integrity.split(' ')[0].split('-');
  const hex = Buffer.from(base64, 'base64').toString('hex');
  const file = path.join(cacheDir, '_cacache', 'content-v2', algorithm, hex.slice(0, 2), hex.slice(2, 4), hex.slice(4));
  return existsSync(file) ? file : undefined;
}

export class FakeNpmRegistry {
  /** Package names whose metadata was asked for, in order of first request. */
  readonly requested = new Set<string>();
  /** name → version → lockfile entry. */
  private readonly packages = new Map<string, Map<string, LockEntry>>();
  private readonly cacheDir: string;
  private readonly server: Server;

  private constructor(lockfile: string, cacheDir: string) {
    this.cacheDir = cacheDir;
    const lock = JSON.parse(readFileSync(lockfile, 'utf8')) as { packages: Record<string, LockEntry> };
    for (const [location, entry] of Object.entries(lock.packages)) {
      if (!location || entry.link || !entry.version) continue;
      const name = entry.name ?? location.slice(location.lastIndexOf('node_modules/') + 'node_modules/'.length);
      if (!this.packages.has(name)) this.packages.set(name, new Map());
      this.packages.get(name)!.set(entry.version, entry);
    }
    this.server = createServer((request, response) => this.answer(request.url ?? '/', request.headers.host ?? '', response));
  }

  /** Listens on a free loopback port; `cacheDir` is the npm cache the tarballs are read from. */
  static async start(lockfile: string, cacheDir = npmCacheDir()): Promise<FakeNpmRegistry> {
    const registry = new FakeNpmRegistry(lockfile, cacheDir);
    await new Promise<void>((resolve) => registry.server.listen(0, '127.0.0.1', resolve));
    return registry;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private answer(url: string, host: string, response: ServerResponse): void {
    const route = decodeURIComponent(url.split('?')[0].slice(1));
    if (route.includes('/-/')) return this.tarball(route, response);
    this.requested.add(route);
    const versions = this.packages.get(route);
    if (!versions) return void response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Not found"}');
    const document = {
      name: route,
      // npm takes `latest` when it satisfies a range, else the highest version that does: any is one the lockfile has.
      'dist-tags': { latest: [...versions.keys()].at(-1) },
      versions: Object.fromEntries(
        [...versions].map(([version, entry]) => {
          const manifest = Object.fromEntries(Object.entries(entry).filter(([field]) => !INSTALL_FIELDS.includes(field)));
          const file = `${route.split('/').at(-1)}-${version}.tgz`;
          return [version, { ...manifest, name: route, version, dist: { integrity: entry.integrity, tarball: `http://${host}/${route}/-/${file}` } }];
        }),
      ),
    };
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(document));
  }

  /** `name/-/basename-version.tgz`, the addresses the documents above give. */
  private tarball(route: string, response: ServerResponse): void {
    const [name, tgz] = route.split('/-/');
    const version = tgz.slice(`${name.split('/').at(-1)}-`.length, -'.tgz'.length);
    const integrity = this.packages.get(name)?.get(version)?.integrity;
    const file = integrity && cachedContent(this.cacheDir, integrity);
    if (!file) return void response.writeHead(404).end();
    response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(file));
  }
}
