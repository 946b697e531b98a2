/**
 * The SQLite reader thread's program (see SqliteReaderThread): a read-only connection to the gateway's database that
 * answers `{ id, sql, params }` with the rows, or with the error's message and codes. Nothing else is imported: the
 * executable carries this file bundled on its own.
 */
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';
import type { ReaderReply, ReaderRequest, ReaderStart } from './sqlite-reader-thread.ts';

const { file, busyTimeoutMs } = workerData as ReaderStart;
const database = new DatabaseSync(file, { readOnly: true, timeout: busyTimeoutMs });
const statements = new Map<string, StatementSync>();

parentPort!.on('message', ({ id, sql, params }: ReaderRequest) => {
  let reply: ReaderReply;
  try {
    let statement = statements.get(sql);
    if (!statement) {
      statements.set(sql, (statement = database.prepare(sql)));
      // integers beyond 2^53 (nano-dollars) read exactly; the main thread narrows the rest to numbers (narrowIntegers)
      statement.setReadBigInts(true);
    }
    reply = { id, rows: statement.all(...params) as Record<string, unknown>[] };
  } catch (error) {
    const e = error as { message?: unknown; code?: unknown; errcode?: unknown };
    reply = { id, error: { message: String(e?.message ?? error), code: e?.code, errcode: e?.errcode } };
  }
  parentPort!.postMessage(reply);
});
