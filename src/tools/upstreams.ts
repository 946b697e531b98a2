import { isDeepStrictEqual } from 'node:util';
import type { ToolsConfig } from './config.ts';
import { ToolsError } from './errors.ts';
import { Upstream, type UpstreamOptions } from './upstream.ts';

/** What a reload did, by server name. */
export interface ReloadSummary {
  added: string[];
  removed: string[];
  restarted: string[];
  /** Only the allow-list changed: applied to the running session. */
  updated: string[];
  unchanged: string[];
}

/** The configured MCP servers by name, in the order of the configuration. */
export class Upstreams {
  private readonly byName = new Map<string, Upstream>();
  private readonly options: UpstreamOptions;
  /** Servers a reload changed or removed, finishing their requests under way (Upstream.retire). */
  private readonly retiring = new Set<Upstream>();

  constructor(options: UpstreamOptions = {}) {
    this.options = options;
  }

  /** Starts every server of `config` (in the background; none waits for another). */
  static start(config: ToolsConfig, options: UpstreamOptions = {}): Upstreams {
    const upstreams = new Upstreams(options);
    upstreams.apply(config);
    return upstreams;
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  all(): Upstream[] {
    return [...this.byName.values()];
  }

  /** The server called `name`; a ToolsError not_found otherwise. */
  get(name: string): Upstream {
    const upstream = this.byName.get(name);
    if (!upstream) throw new ToolsError('not_found', `no server named "${name}" (servers: ${this.names().join(', ') || 'none'})`);
    return upstream;
  }

  /**
   * Makes the running servers match `config`: starts new entries, stops removed ones, restarts those whose entry
   * changed, applies a changed allow-list (`tools`) alone in place, and leaves the others (and their sessions) alone.
   */
  apply(config: ToolsConfig): ReloadSummary {
    const summary: ReloadSummary = { added: [], removed: [], restarted: [], updated: [], unchanged: [] };
    const wanted = new Set(config.servers.map((server) => server.name));
    for (const [name, upstream] of this.byName) {
      if (!wanted.has(name)) {
        this.retire(upstream);
        summary.removed.push(name);
      }
    }
    const next = new Map<string, Upstream>();
    for (const server of config.servers) {
      const current = this.byName.get(server.name);
      if (current && isDeepStrictEqual(current.config, server)) {
        next.set(server.name, current);
        summary.unchanged.push(server.name);
        continue;
      }
      if (current && isDeepStrictEqual({ ...current.config, tools: undefined }, { ...server, tools: undefined })) {
        // a stateful server keeps its state: nothing but the tool server's filter changes
        current.allowOnly(server);
        next.set(server.name, current);
        summary.updated.push(server.name);
        continue;
      }
      if (current) {
        this.retire(current);
        summary.restarted.push(server.name);
      } else {
        summary.added.push(server.name);
      }
      // a changed entry's new session is a restart of the server (tools_server_restarts_total), not a first start
      const upstream = new Upstream(server, current ? { ...this.options, onSession: (name) => this.options.onSession?.(name, true) } : this.options);
      upstream.start();
      next.set(server.name, upstream);
    }
    this.byName.clear();
    for (const [name, upstream] of next) this.byName.set(name, upstream);
    return summary;
  }

  /** Resolves when every server's first start attempt has ended (each bounded by its start-up timeout). */
  async firstAttemptsSettled(): Promise<void> {
    await Promise.all(this.all().map((upstream) => upstream.firstAttemptSettled()));
  }

  /** Closes every session and stops every child process, those of servers still retiring too. */
  async close(): Promise<void> {
    const all = [...this.all(), ...this.retiring];
    this.byName.clear();
    this.retiring.clear();
    await Promise.all(all.map((upstream) => upstream.close()));
  }

  private retire(upstream: Upstream): void {
    this.retiring.add(upstream);
    void upstream.retire().finally(() => this.retiring.delete(upstream));
  }
}
