// Reads the local JSONL batch input ({custom_id, method, url, body} per line) that create_batch uploads.

import { readFile } from 'node:fs/promises';
import { InvalidRequestError } from '../../errors.ts';

export interface BatchInputLine {
  custom_id: string;
  method: string;
  url: string;
  body: Record<string, unknown>;
}

/** Parses and checks every line; a malformed file is the caller's error (InvalidRequestError naming the line). */
export async function readBatchInput(path: string, endpoint: string, provider: string): Promise<BatchInputLine[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new InvalidRequestError(`Cannot read the batch input file ${path}: ${(error as Error).message}`, error, provider, { param: 'input_file_path' });
  }
  const lines: BatchInputLine[] = [];
  const ids = new Set<string>();
  text.split('\n').forEach((raw, index) => {
    if (raw.trim() === '') return;
    const where = `${path} line ${index + 1}`;
    let line: Partial<BatchInputLine>;
    try {
      line = JSON.parse(raw) as Partial<BatchInputLine>;
    } catch {
      throw new InvalidRequestError(`${where} is not valid JSON`, null, provider, { param: 'input_file_path' });
    }
    if (typeof line.custom_id !== 'string' || line.custom_id === '') throw new InvalidRequestError(`${where} has no custom_id`, null, provider, { param: 'custom_id' });
    if (ids.has(line.custom_id)) throw new InvalidRequestError(`${where} repeats custom_id ${line.custom_id}`, null, provider, { param: 'custom_id' });
    ids.add(line.custom_id);
    if (typeof line.body !== 'object' || line.body === null || Array.isArray(line.body)) {
      throw new InvalidRequestError(`${where} has no body object`, null, provider, { param: 'body' });
    }
    if (line.method !== undefined && line.method.toUpperCase() !== 'POST') throw new InvalidRequestError(`${where}: method must be POST`, null, provider, { param: 'method' });
    if (line.url !== undefined && line.url !== endpoint) {
      throw new InvalidRequestError(`${where}: url ${line.url} differs from the batch endpoint ${endpoint}`, null, provider, { param: 'url' });
    }
    lines.push({ custom_id: line.custom_id, method: 'POST', url: endpoint, body: line.body });
  });
  if (lines.length === 0) throw new InvalidRequestError(`The batch input file ${path} has no requests`, null, provider, { param: 'input_file_path' });
  return lines;
}
