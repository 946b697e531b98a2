// otari's own batch API (mozilla-ai/otari, /v1/batches): the requests travel in the create body, not as an uploaded
// file, and otari runs them at the upstream provider its model names; every later call names that provider again
// (`?provider=`), given here as the call's `provider_name` option (as any-llm's otari client takes it).

import OpenAI from 'openai';
import { BatchNotCompleteError, InvalidRequestError, UnsupportedParameterError } from '../../errors.ts';
import type { Batch, BatchOperations, BatchResultItem, CallOptions } from '../../provider.ts';
import { readBatchInput } from '../shared/batch-input.ts';

const ENDPOINT = '/v1/chat/completions';

/** otari's batch: OpenAI's Batch plus `provider`, the upstream provider it runs at (kept: later calls need it). */
const asBatch = (answer: unknown): Batch => answer as Batch;

export function otariBatches(client: OpenAI, provider_name: string): BatchOperations {
  /** The upstream provider of a batch, from the call's options, as the query otari needs. */
  const upstream = (call: CallOptions): { provider: string } => {
    const name = call.extra.provider_name;
    if (typeof name !== 'string' || name === '') {
      throw new InvalidRequestError(
        "otari batch calls need provider_name: the provider the batch runs at (the 'provider' field of the created batch)",
        null,
        provider_name,
        { param: 'provider_name' },
      );
    }
    return { provider: name };
  };
  const retrieve = async (batch_id: string, call: CallOptions) =>
    asBatch(await client.get(`/batches/${encodeURIComponent(batch_id)}`, { query: upstream(call), signal: call.signal }));

  return {
    async create(params, call) {
      if (params.endpoint !== ENDPOINT) {
        throw new UnsupportedParameterError('endpoint', provider_name, `otari batches run ${ENDPOINT} only; got ${params.endpoint}`);
      }
      const lines = await readBatchInput(params.input_file_path, params.endpoint, provider_name);
      const { provider_name: _unused, ...extra } = call.extra;
      const body = {
        // otari takes one model for the batch: the first line's, unless the call names one
        model: lines[0]!.body.model,
        requests: lines.map((line) => ({ custom_id: line.custom_id, body: line.body })),
        completion_window: params.completion_window,
        ...(params.metadata ? { metadata: params.metadata } : {}),
        ...extra,
      };
      if (typeof body.model !== 'string' || body.model === '') {
        throw new InvalidRequestError('otari batches need a model: in the first line’s body or as the model option', null, provider_name, { param: 'model' });
      }
      return asBatch(await client.post('/batches', { body, signal: call.signal }));
    },
    retrieve,
    cancel: async (batch_id, call) =>
      asBatch(await client.post(`/batches/${encodeURIComponent(batch_id)}/cancel`, { query: upstream(call), signal: call.signal })),
    async list(params, call) {
      const query = { ...upstream(call), ...(params.after !== undefined ? { after: params.after } : {}), ...(params.limit !== undefined ? { limit: params.limit } : {}) };
      const page = (await client.get('/batches', { query, signal: call.signal })) as { data?: unknown[] };
      return (page.data ?? []).map(asBatch);
    },
    async results(batch_id, call) {
      const batch = await retrieve(batch_id, call);
      if (batch.status !== 'completed') throw new BatchNotCompleteError(null, null, provider_name, { batch_id, batch_status: batch.status });
      let answer: { results?: Partial<BatchResultItem>[] };
      try {
        answer = (await client.get(`/batches/${encodeURIComponent(batch_id)}/results`, { query: upstream(call), signal: call.signal })) as typeof answer;
      } catch (error) {
        // otari's "not yet complete" (the batch moved on between the two calls, or otari saw it differently)
        if (error instanceof OpenAI.APIError && error.status === 409) {
          throw new BatchNotCompleteError(null, error, provider_name, { batch_id, batch_status: batch.status });
        }
        throw error;
      }
      return (answer.results ?? []).map((item) => ({
        custom_id: String(item.custom_id ?? ''),
        result: item.result ?? null,
        error: item.error ? { code: item.error.code ?? null, message: item.error.message ?? '' } : null,
      }));
    },
  };
}
