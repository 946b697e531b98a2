// Anthropic Message Batches behind the Hub's batch operations (OpenAI Batch objects out).

import type Anthropic from '@anthropic-ai/sdk';
import { BatchNotCompleteError, UnsupportedParameterError } from '../../errors.ts';
import type { Batch, BatchOperations, BatchResultItem, CallOptions, CreateBatchParams } from '../../provider.ts';
import { readBatchInput } from '../shared/batch-input.ts';

const PROVIDER = 'anthropic';
const ENDPOINT = '/v1/messages';

export function anthropicBatches(client: Anthropic): BatchOperations {
  return {
    async create(params: CreateBatchParams, call: CallOptions): Promise<Batch> {
      if (params.endpoint !== ENDPOINT) {
        throw new UnsupportedParameterError('endpoint', PROVIDER, `Anthropic batches run ${ENDPOINT} only, got ${params.endpoint}`);
      }
      if (params.completion_window !== '24h') {
        throw new UnsupportedParameterError('completion_window', PROVIDER, 'Anthropic batches always have a 24h window');
      }
      if (params.metadata && Object.keys(params.metadata).length > 0) {
        throw new UnsupportedParameterError('metadata', PROVIDER, 'Anthropic message batches carry no metadata');
      }
      const lines = await readBatchInput(params.input_file_path, params.endpoint, PROVIDER);
      const requests = lines.map((line) => ({ custom_id: line.custom_id, params: line.body as unknown as Anthropic.MessageCreateParamsNonStreaming }));
      const batch = await client.messages.batches.create({ requests }, { signal: call.signal });
      return toBatch(batch);
    },
    async retrieve(batchId, call) {
      return toBatch(await client.messages.batches.retrieve(batchId, {}, { signal: call.signal }));
    },
    async cancel(batchId, call) {
      return toBatch(await client.messages.batches.cancel(batchId, {}, { signal: call.signal }));
    },
    async list(params, call) {
      const page = await client.messages.batches.list(
        { ...(params.after !== undefined ? { after_id: params.after } : {}), ...(params.limit !== undefined ? { limit: params.limit } : {}) },
        { signal: call.signal },
      );
      return page.data.map(toBatch);
    },
    async results(batchId, call) {
      const batch = await client.messages.batches.retrieve(batchId, {}, { signal: call.signal });
      if (batch.processing_status !== 'ended' || !batch.results_url) {
        throw new BatchNotCompleteError(null, null, PROVIDER, { batch_id: batchId, batch_status: toBatch(batch).status });
      }
      const items: BatchResultItem[] = [];
      for await (const line of await client.messages.batches.results(batchId, {}, { signal: call.signal })) items.push(toResultItem(line));
      return items;
    },
  };
}

function toResultItem(line: Anthropic.Messages.MessageBatchIndividualResponse): BatchResultItem {
  const result = line.result;
  switch (result.type) {
    case 'succeeded':
      return { custom_id: line.custom_id, result: result.message, error: null };
    case 'errored': {
      const body = result.error as { error?: { type?: string; message?: string } };
      return { custom_id: line.custom_id, result: null, error: { code: body.error?.type ?? null, message: body.error?.message ?? 'errored' } };
    }
    default:
      return { custom_id: line.custom_id, result: null, error: { code: result.type, message: `The request was ${result.type}` } };
  }
}

const seconds = (iso: string | null | undefined): number | null => (iso ? Math.floor(Date.parse(iso) / 1000) : null);

/** Anthropic's processing_status (in_progress, canceling, ended) onto the OpenAI statuses. */
export function batchStatus(batch: Anthropic.Messages.MessageBatch): Batch['status'] {
  if (batch.processing_status === 'in_progress') return 'in_progress';
  if (batch.processing_status === 'canceling') return 'cancelling';
  if (batch.cancel_initiated_at) return 'cancelled';
  const counts = batch.request_counts;
  const total = counts.succeeded + counts.errored + counts.canceled + counts.expired;
  if (total > 0 && counts.expired === total) return 'expired';
  return 'completed';
}

export function toBatch(batch: Anthropic.Messages.MessageBatch): Batch {
  const counts = batch.request_counts;
  const status = batchStatus(batch);
  return {
    id: batch.id,
    object: 'batch',
    endpoint: ENDPOINT,
    completion_window: '24h',
    input_file_id: '',
    status,
    created_at: seconds(batch.created_at) ?? 0,
    expires_at: seconds(batch.expires_at) ?? undefined,
    in_progress_at: seconds(batch.created_at) ?? undefined,
    completed_at: status === 'completed' ? (seconds(batch.ended_at) ?? undefined) : undefined,
    cancelling_at: seconds(batch.cancel_initiated_at) ?? undefined,
    cancelled_at: status === 'cancelled' ? (seconds(batch.ended_at) ?? undefined) : undefined,
    expired_at: status === 'expired' ? (seconds(batch.ended_at) ?? undefined) : undefined,
    request_counts: {
      total: counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired,
      completed: counts.succeeded,
      failed: counts.errored + counts.canceled + counts.expired,
    },
    metadata: null,
  };
}
