// OpenAI batches: upload the JSONL file (purpose "batch"), create the job, poll, cancel, list, download results.

import { createReadStream } from 'node:fs';
import type OpenAI from 'openai';
import { BatchNotCompleteError, ProviderError } from '../../errors.ts';
import type { BatchOperations, BatchResultItem } from '../../provider.ts';

/** One line of an OpenAI batch output or error file. */
interface OutputLine {
  custom_id: string;
  response?: { status_code: number; body: unknown } | null;
  error?: { code?: string | null; message?: string } | null;
}

function parseBatchOutput(text: string, provider_name: string): BatchResultItem[] {
  const items: BatchResultItem[] = [];
  for (const [n, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    let parsed: OutputLine;
    try {
      parsed = JSON.parse(line) as OutputLine;
    } catch (cause) {
      throw new ProviderError(`Batch result line ${n + 1} is not JSON`, cause, provider_name);
    }
    const status = parsed.response?.status_code ?? 200;
    if (parsed.error) {
      items.push({ custom_id: parsed.custom_id, result: null, error: { code: parsed.error.code ?? null, message: parsed.error.message ?? '' } });
    } else if (status >= 400) {
      const body = parsed.response?.body as { error?: { code?: string; message?: string } } | undefined;
      items.push({
        custom_id: parsed.custom_id,
        result: null,
        error: { code: body?.error?.code ?? String(status), message: body?.error?.message ?? `HTTP ${status}` },
      });
    } else {
      items.push({ custom_id: parsed.custom_id, result: parsed.response?.body ?? null, error: null });
    }
  }
  return items;
}

/** Final states whose output (and error) files exist: completed, and ended before every line ran. */
const FINAL_WITH_RESULTS: ReadonlySet<string> = new Set(['completed', 'expired', 'cancelled']);

/** The error of a line that an expired or cancelled batch never ran, with OpenAI's own codes for it. */
function notRun(status: string): { code: string; message: string } {
  return status === 'expired'
    ? { code: 'batch_expired', message: 'The batch expired before this request ran' }
    : { code: 'batch_cancelled', message: 'The batch was cancelled before this request ran' };
}

/** The custom_id of each line of a batch input file, in order. */
function inputCustomIds(text: string): string[] {
  const ids: string[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      const id = (JSON.parse(line) as { custom_id?: unknown }).custom_id;
      if (typeof id === 'string') ids.push(id);
    } catch {
      // The provider validated the file when it accepted the batch; a line it could not read never ran either.
    }
  }
  return ids;
}

export function openAIBatches(client: OpenAI, provider_name: string): BatchOperations {
  return {
    async create(params, call) {
      const file = await client.files.create({ file: createReadStream(params.input_file_path), purpose: 'batch' }, { signal: call.signal });
      return client.batches.create(
        {
          input_file_id: file.id,
          endpoint: params.endpoint as OpenAI.BatchCreateParams['endpoint'],
          completion_window: params.completion_window as OpenAI.BatchCreateParams['completion_window'],
          ...(params.metadata ? { metadata: params.metadata } : {}),
          ...call.extra,
        },
        { signal: call.signal },
      );
    },
    retrieve: (batch_id, call) => client.batches.retrieve(batch_id, { signal: call.signal }),
    cancel: (batch_id, call) => client.batches.cancel(batch_id, { signal: call.signal }),
    async list(params, call) {
      const query: OpenAI.BatchListParams = {};
      if (params.after !== undefined) query.after = params.after;
      if (params.limit !== undefined) query.limit = params.limit;
      const page = await client.batches.list(query, { signal: call.signal });
      return page.data;
    },
    async results(batch_id, call) {
      const batch = await client.batches.retrieve(batch_id, { signal: call.signal });
      if (!FINAL_WITH_RESULTS.has(batch.status)) {
        throw new BatchNotCompleteError(null, null, provider_name, { batch_id, batch_status: batch.status });
      }
      const download = async (fileId: string) => (await client.files.content(fileId, { signal: call.signal })).text();
      const items: BatchResultItem[] = [];
      for (const fileId of [batch.output_file_id, batch.error_file_id]) {
        if (fileId) items.push(...parseBatchOutput(await download(fileId), provider_name));
      }
      if (batch.status === 'completed') return items;
      // Expired or cancelled: OpenAI writes the lines that never ran to the error file (batch_expired,
      // batch_cancelled); lines that no file mentions are found in the input file and reported the same way.
      const total = batch.request_counts?.total;
      if (typeof total === 'number' && total > 0 && items.length >= total) return items;
      const reported = new Set(items.map((item) => item.custom_id));
      for (const custom_id of inputCustomIds(await download(batch.input_file_id))) {
        if (!reported.has(custom_id)) items.push({ custom_id, result: null, error: notRun(batch.status) });
      }
      return items;
    },
  };
}
