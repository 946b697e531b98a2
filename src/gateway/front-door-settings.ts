import { readFileSync } from 'node:fs';

/** How the gateway's HTTP front door bounds its clients (docs/gateway.md, "Front door"). */
export interface FrontDoorSettings {
  /** The whole request, headers and body, must arrive within this (node's requestTimeout): a slow body is cut (408). */
  requestTimeoutSeconds: number;
  /** The request line and headers must arrive within this (node's headersTimeout). */
  headersTimeoutSeconds: number;
  /** Open client connections at most (node's maxConnections): kept below the open-file limit. */
  maxConnections: number;
  /** Open connections of one client address at most, so one client cannot take every connection. */
  maxConnectionsPerClient: number;
  /** Largest body of a model call (413 beyond). */
  bodyLimitBytes: number;
  /** Largest body of a management call (413 beyond). */
  managementBodyLimitBytes: number;
  /** How deep arrays and objects of a JSON body may nest (400 beyond). */
  maxJsonDepth: number;
  /** Failed credentials per client address and window before the address is refused with 429; null: no throttle. */
  authThrottle: { maxFailures: number; windowSeconds: number } | null;
  /** fastify's trustProxy: whether (or which) proxies' X-Forwarded-For names the client of a request. */
  trustProxy: boolean | string[];
}

/** The most connections by default, whatever the open-file limit. */
const DEFAULT_CONNECTION_CEILING = 10_000;
/** Files the process needs beside client connections: the database, logs, the runtime's own. */
const RESERVED_FILES = 128;

/**
 * Client connections the open-file limit leaves room for: each call in flight also holds a connection to its provider,
 * so half of what remains after the process's own files, at most 10,000. Node raises its soft limit to the hard one at
 * start, which /proc/self/limits shows; where it cannot be read, 10,000.
 */
function defaultMaxConnections(): number {
  let limit = Number.POSITIVE_INFINITY;
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((text) => text.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    if (soft && /^\d+$/.test(soft)) limit = Number(soft);
  } catch {
    // not Linux: no /proc
  }
  return Math.max(16, Math.min(DEFAULT_CONNECTION_CEILING, Math.floor((limit - RESERVED_FILES) / 2)));
}

/** The defaults, as `gateway serve` uses them when the configuration sets nothing. */
export function defaultFrontDoor(): FrontDoorSettings {
  const maxConnections = defaultMaxConnections();
  return {
    requestTimeoutSeconds: 60,
    headersTimeoutSeconds: 10,
    maxConnections,
    maxConnectionsPerClient: Math.max(1, Math.floor(maxConnections / 2)),
    bodyLimitBytes: 16 * 2 ** 20,
    managementBodyLimitBytes: 64 * 2 ** 10,
    maxJsonDepth: 64,
    authThrottle: { maxFailures: 20, windowSeconds: 60 },
    trustProxy: false,
  };
}
