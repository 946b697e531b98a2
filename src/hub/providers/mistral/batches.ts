// Mistral batch jobs behind the Hub's batch operations: the JSONL input is rewritten to Mistral's line format
// ({custom_id, body} without the model, which goes on the job), uploaded with purpose "batch", then the job is made.

import type { Mistral } from '@mistralai/mistralai';
import type * as components from '@mistralai/mistralai/models/components';
import { BatchNotCompleteError, InvalidRequestError, UnsupportedParameterError } from '../../errors.ts';
import type { Batch, BatchOperations, BatchResultItem, CallOptions, CreateBatchParams } from '../../provider.ts';
import { readBatchInput } from '../shared/batch-input.ts';

const PROVIDER = 'mistral';
const ENDPOINTS = [
  '/v1/chat/completions',
  '/v1/embeddings',
  '/v1/fim/completions',
  '/v1/moderations',
  '/v1/chat/moderations',
  '/v1/ocr',
  '/v1/classifications',
  '/v1/chat/classifications',
  '/v1/conversations',
  '/v1/audio/transcriptions',
];
const TERMINAL = new Set(['SUCCESS', 'FAILED', 'TIMEOUT_EXCEEDED', 'CANCELLED']);
const LIST_PAGE_SIZE = 100;

const options = (call: CallOptions) => ({ fetchOptions: { signal: call.signal ?? null } });

/** "24h" → 24; Mistral jobs take a timeout in whole hours. */
function windowHours(window: string): number {
  const match = /^(\d+)h$/.exec(window);
  if (!match || Number(match[1]) < 1) throw new UnsupportedParameterError('completion_window', PROVIDER, `Use a whole number of hours such as 24h, got ${window}`);
  return Number(match[1]);
}

export function mistralBatches(client: Mistral): BatchOperations {
  async function downloadLines(fileId: string, call: CallOptions): Promise<Record<string, unknown>[]> {
    const stream = await client.files.download({ fileId }, options(call));
    const text = await new Response(stream).text();
    return text
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  return {
    async create(params: CreateBatchParams, call: CallOptions): Promise<Batch> {
      if (!ENDPOINTS.includes(params.endpoint)) {
        throw new UnsupportedParameterError('endpoint', PROVIDER, `Mistral batches run ${ENDPOINTS.join(', ')}; got ${params.endpoint}`);
      }
      const timeoutHours = windowHours(params.completion_window);
      const lines = await readBatchInput(params.input_file_path, params.endpoint, PROVIDER);
      const models = new Set(lines.map((line) => line.body.model).filter((model) => model !== undefined));
      if (models.size !== 1) {
        throw new InvalidRequestError(`A Mistral batch runs one model; the lines name ${models.size === 0 ? 'none' : [...models].join(', ')}`, null, PROVIDER, { param: 'model' });
      }
      const model = String([...models][0]);
      const jsonl = lines.map(({ custom_id, body }) => {
        const { model: _model, ...rest } = body;
        return JSON.stringify({ custom_id, body: rest });
      });
      const file = await client.files.upload(
        { purpose: 'batch', file: { fileName: 'batch-input.jsonl', content: new TextEncoder().encode(jsonl.join('\n') + '\n') } },
        options(call),
      );
      const job = await client.batch.jobs.create(
        { inputFiles: [file.id], endpoint: params.endpoint as components.ApiEndpoint, model, timeoutHours, ...(params.metadata ? { metadata: params.metadata } : {}) },
        options(call),
      );
      return toBatch(job, params.completion_window);
    },
    async retrieve(batchId, call) {
      return toBatch(await client.batch.jobs.get({ jobId: batchId }, options(call)));
    },
    async cancel(batchId, call) {
      return toBatch(await client.batch.jobs.cancel({ jobId: batchId }, options(call)));
    },
    /** Mistral pages by number (newest first); `after` is found by walking the pages. */
    async list(params, call) {
      const limit = params.limit;
      if (params.after === undefined) {
        const page = await client.batch.jobs.list({ page: 0, ...(limit !== undefined ? { pageSize: limit } : {}) }, options(call));
        return (page.data ?? []).map((job) => toBatch(job));
      }
      const found: Batch[] = [];
      let seenAfter = false;
      for (let page = 0; ; page++) {
        const response = await client.batch.jobs.list({ page, pageSize: LIST_PAGE_SIZE }, options(call));
        const jobs = response.data ?? [];
        for (const job of jobs) {
          if (seenAfter) found.push(toBatch(job));
          else if (job.id === params.after) seenAfter = true;
          if (limit !== undefined && found.length >= limit) return found;
        }
        if (jobs.length < LIST_PAGE_SIZE || (page + 1) * LIST_PAGE_SIZE >= response.total) return found;
      }
    },
    async results(batchId, call) {
      const job = await client.batch.jobs.get({ jobId: batchId }, options(call));
      if (!TERMINAL.has(job.status)) throw new BatchNotCompleteError(null, null, PROVIDER, { batch_id: batchId, batch_status: batchStatus(job.status) });
      const items: BatchResultItem[] = [];
      for (const fileId of [job.outputFile, job.errorFile]) {
        if (!fileId) continue;
        for (const line of await downloadLines(fileId, call)) items.push(toResultItem(line));
      }
      return items;
    },
  };
}

/** An output line: {id, custom_id, response: {status_code, body}, error}. */
function toResultItem(line: Record<string, unknown>): BatchResultItem {
  const response = line.response as { status_code?: number; body?: unknown } | null | undefined;
  const error = line.error as { message?: string; code?: string | number } | string | null | undefined;
  const customId = String(line.custom_id ?? '');
  if (error) {
    const message = typeof error === 'string' ? error : (error.message ?? JSON.stringify(error));
    const code = typeof error === 'string' ? null : error.code !== undefined ? String(error.code) : null;
    return { custom_id: customId, result: null, error: { code, message } };
  }
  if (response && (response.status_code ?? 200) >= 400) {
    return { custom_id: customId, result: null, error: { code: String(response.status_code), message: JSON.stringify(response.body) } };
  }
  return { custom_id: customId, result: response?.body ?? null, error: null };
}

export function batchStatus(status: string): Batch['status'] {
  switch (status) {
    case 'QUEUED':
    case 'RUNNING':
      return 'in_progress';
    case 'SUCCESS':
      return 'completed';
    case 'FAILED':
      return 'failed';
    case 'TIMEOUT_EXCEEDED':
      return 'expired';
    case 'CANCELLATION_REQUESTED':
      return 'cancelling';
    case 'CANCELLED':
      return 'cancelled';
    default:
      return 'in_progress';
  }
}

export function toBatch(job: components.BatchJob, completionWindow = '24h'): Batch {
  const status = batchStatus(job.status);
  const completedAt = job.completedAt ?? undefined;
  return {
    id: job.id,
    object: 'batch',
    endpoint: job.endpoint,
    completion_window: completionWindow,
    input_file_id: job.inputFiles[0] ?? '',
    output_file_id: job.outputFile ?? undefined,
    error_file_id: job.errorFile ?? undefined,
    status,
    created_at: job.createdAt,
    in_progress_at: job.startedAt ?? undefined,
    completed_at: status === 'completed' ? completedAt : undefined,
    failed_at: status === 'failed' ? completedAt : undefined,
    cancelled_at: status === 'cancelled' ? completedAt : undefined,
    expired_at: status === 'expired' ? completedAt : undefined,
    request_counts: { total: job.totalRequests, completed: job.succeededRequests, failed: job.failedRequests },
    metadata: (job.metadata as Record<string, string> | null | undefined) ?? null,
    ...(job.model ? { model: job.model } : {}),
    ...(job.errors.length > 0 ? { errors: { object: 'list', data: job.errors.map((e) => ({ message: e.message })) } } : {}),
  };
}
