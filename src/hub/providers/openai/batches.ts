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
      if (batch.status !== 'completed') {
        throw new BatchNotCompleteError(null, null, provider_name, { batch_id, batch_status: batch.status });
      }
      const items: BatchResultItem[] = [];
      for (const fileId of [batch.output_file_id, batch.error_file_id]) {
        if (!fileId) continue;
        const response = await client.files.content(fileId, { signal: call.signal });
        items.push(...parseBatchOutput(await response.text(), provider_name));
      }
      return items;
    },
  };
}
