import { createWriteStream, type WriteStream } from 'node:fs';
import type { AuditConfig } from './config.ts';
import type { ApiOperation } from './operations.ts';

/** One line of the audit log (JSON). Never a key, a header or a query string: only what is named here. */
export interface AuditEntry {
  time: string;
  /** The API key's name; null without authentication or when the request had no valid key. */
  key: string | null;
  server: string | null;
  operation: string;
  name: string | null;
  status: number;
  duration_ms: number;
  arguments?: unknown;
}

/**
 * The audit log: one JSON line per API request, appended to a file or written to stderr. A file that cannot be
 * written is reported once on stderr; requests are never failed for it.
 */
export class AuditLog {
  readonly config: AuditConfig;
  readonly #write: (line: string) => void;
  readonly #stream: WriteStream | undefined;

  constructor(config: AuditConfig, log: (line: string) => void) {
    this.config = config;
    if (config.file === '-') {
      this.#write = log;
      return;
    }
    const stream = createWriteStream(config.file, { flags: 'a', mode: 0o600 });
    let reported = false;
    stream.on('error', (error) => {
      if (!reported) log(`audit log ${config.file}: ${error.message}; audit lines are lost until the next reload`);
      reported = true;
    });
    this.#stream = stream;
    this.#write = (line) => {
      if (!stream.destroyed) stream.write(`${line}\n`);
    };
  }

  record(operation: ApiOperation, key: string | null, status: number, ms: number): void {
    const entry: AuditEntry = {
      time: new Date().toISOString(),
      key,
      server: operation.server,
      operation: operation.operation,
      name: operation.name,
      status,
      duration_ms: Math.round(ms * 1000) / 1000,
    };
    if (this.config.includeArguments && operation.arguments !== undefined) entry.arguments = operation.arguments;
    this.#write(JSON.stringify(entry));
  }

  /** Flushes and closes the file (nothing to do for stderr). */
  close(): Promise<void> {
    const stream = this.#stream;
    if (!stream || stream.destroyed) return Promise.resolve();
    return new Promise((resolve) => stream.end(resolve));
  }
}
