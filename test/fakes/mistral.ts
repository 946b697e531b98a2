// A fake of the Mistral API (api.mistral.ai) on loopback: /v1/chat/completions (JSON and SSE ending in [DONE]),
// /v1/embeddings, /v1/models, /v1/files (multipart upload, content download), /v1/batch/jobs (create, get, cancel,
// list by page). Errors: {object: "error", message, type, param, code}; 422: {detail: [{type, loc, msg}]}.

import { fakeVector, VendorServer, type RecordedRequest, type Reply, type Route } from './vendor-server.ts';

export const mistralError = (status: number, message: string, type = 'invalid_request_error', code: string | null = null, param: string | null = null, headers?: Record<string, string>): Reply => ({
  status,
  headers,
  json: { object: 'error', message, type, param, code },
});

type Body = Record<string, unknown>;

function lastUserText(body: Body): string {
  const last = ((body.messages ?? []) as { role: string; content: unknown }[]).filter((m) => m.role === 'user').at(-1);
  if (!last) return '';
  if (typeof last.content === 'string') return last.content;
  return ((last.content as { type: string; text?: string }[]).find((c) => c.type === 'text')?.text ?? '').toString();
}

export function fakeChatCompletion(body: Body) {
  return {
    id: 'cmpl-fake-1',
    object: 'chat.completion',
    model: body.model,
    created: 1_763_000_000,
    choices: [{ index: 0, message: { role: 'assistant', content: `echo: ${lastUserText(body)}`, tool_calls: null }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 14, completion_tokens: 5, total_tokens: 19 },
  };
}

export function fakeChatChunks(body: Body): { data: unknown }[] {
  const text = `echo: ${lastUserText(body)}`;
  const pieces = text.match(/.{1,5}/gs) ?? [];
  const chunk = (delta: object, finish: string | null, usage?: object) => ({
    data: { id: 'cmpl-fake-1', object: 'chat.completion.chunk', created: 1_763_000_000, model: body.model, choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) },
  });
  return [
    chunk({ role: 'assistant', content: '' }, null),
    ...pieces.map((piece) => chunk({ content: piece }, null)),
    chunk({ content: '' }, 'stop', { prompt_tokens: 14, completion_tokens: 5, total_tokens: 19 }),
    { data: '[DONE]' },
  ];
}

interface FakeFile {
  id: string;
  name: string;
  content: string;
  purpose: string;
}
interface FakeJob {
  id: string;
  input_files: string[];
  endpoint: string;
  model: string;
  metadata: Record<string, string> | null;
  timeout_hours: number;
  created_at: number;
  status: string;
  polls: number;
  output_file: string | null;
  error_file: string | null;
  failed: number;
  lines: number;
}

export interface MistralFake {
  server: VendorServer;
  files: Map<string, FakeFile>;
  /** Gets a job must see before it succeeds (polling). */
  pollsUntilDone: number;
  close(): Promise<void>;
}

const TOOL_CALL_ID = /^[a-zA-Z0-9]{9}$/;

export async function startMistralFake(): Promise<MistralFake> {
  const files = new Map<string, FakeFile>();
  const jobs: FakeJob[] = [];
  const fake = { files, pollsUntilDone: 2 } as MistralFake;

  const authorised = (request: RecordedRequest): Reply | null =>
    request.headers.authorization === 'Bearer bad-key' || !request.headers.authorization ? { status: 401, json: { message: 'Unauthorized', request_id: 'req-fake' } } : null;

  const jobObject = (job: FakeJob) => ({
    id: job.id,
    object: 'batch',
    input_files: job.input_files,
    metadata: job.metadata,
    endpoint: job.endpoint,
    model: job.model,
    output_file: job.output_file,
    error_file: job.error_file,
    errors: job.failed > 0 ? [{ message: `${job.failed} request(s) failed`, count: job.failed }] : [],
    status: job.status,
    created_at: job.created_at,
    total_requests: job.lines,
    completed_requests: job.status === 'SUCCESS' ? job.lines : 0,
    succeeded_requests: job.status === 'SUCCESS' ? job.lines - job.failed : 0,
    failed_requests: job.failed,
    started_at: job.created_at + 1,
    completed_at: ['SUCCESS', 'CANCELLED'].includes(job.status) ? job.created_at + 60 : null,
  });
  const findJob = (id: string) => jobs.find((j) => j.id === id);
  const noJob = (id: string) => mistralError(404, `Batch job ${id} not found`, 'not_found', '3000');

  /**
   * Runs a finished job: one output line per input line, answered by the fake model; a line asking for
   * max_tokens 0 fails and goes to the error file instead.
   */
  function finish(job: FakeJob): void {
    const input = files.get(job.input_files[0])!.content.split('\n').filter((l) => l.trim() !== '');
    const output: object[] = [];
    const errors: object[] = [];
    input.forEach((raw, i) => {
      const line = JSON.parse(raw) as { custom_id: string; body: Body };
      if (line.body.max_tokens === 0) {
        errors.push({ id: `batch-line-${i}`, custom_id: line.custom_id, response: null, error: { message: 'max_tokens must be at least 1', code: '3001' } });
      } else {
        output.push({ id: `batch-line-${i}`, custom_id: line.custom_id, response: { status_code: 200, body: fakeChatCompletion({ ...line.body, model: job.model }) }, error: null });
      }
    });
    const store = (id: string, lines: object[]) => files.set(id, { id, name: `${id}.jsonl`, content: lines.map((o) => JSON.stringify(o)).join('\n') + '\n', purpose: 'batch_result' });
    job.output_file = `file-out-${job.id}`;
    store(job.output_file, output);
    if (errors.length > 0) {
      job.error_file = `file-err-${job.id}`;
      store(job.error_file, errors);
    }
    job.failed = errors.length;
    job.status = 'SUCCESS';
  }

  const routes: Route[] = [
    {
      method: 'POST',
      path: /^\/v1\/chat\/completions$/,
      handle(request) {
        const denied = authorised(request);
        if (denied) return denied;
        const body = request.json as Body;
        if (!Array.isArray(body?.messages)) return { status: 422, json: { detail: [{ type: 'missing', loc: ['body', 'messages'], msg: 'Field required', input: body }] } };
        for (const message of body.messages as { tool_call_id?: string; tool_calls?: { id: string }[] }[]) {
          for (const id of [message.tool_call_id, ...(message.tool_calls ?? []).map((c) => c.id)]) {
            if (id !== undefined && !TOOL_CALL_ID.test(id)) {
              return mistralError(400, `Tool call id was ${id} but must be a-z, A-Z, 0-9, with a length of 9.`, 'invalid_request_message', '3230');
            }
          }
        }
        return body.stream ? { sse: fakeChatChunks(body) } : { json: fakeChatCompletion(body) };
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/embeddings$/,
      handle(request) {
        const denied = authorised(request);
        if (denied) return denied;
        const body = request.json as { model: string; input: string | string[]; output_dimension?: number | null };
        const inputs = typeof body.input === 'string' ? [body.input] : body.input;
        const tokens = inputs.reduce((n, text) => n + text.split(/\s+/).length, 0);
        return {
          json: {
            id: 'embd-fake',
            object: 'list',
            model: body.model,
            data: inputs.map((text, index) => ({ object: 'embedding', embedding: fakeVector(text, body.output_dimension ?? undefined), index })),
            usage: { prompt_tokens: tokens, completion_tokens: 0, total_tokens: tokens },
          },
        };
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/models$/,
      handle: (request) =>
        authorised(request) ?? {
          json: {
            object: 'list',
            data: ['mistral-large-latest', 'mistral-small-latest', 'mistral-embed'].map((id) => ({
              id,
              object: 'model',
              created: 1_700_000_000,
              owned_by: 'mistralai',
              type: 'base',
              capabilities: { completion_chat: !id.endsWith('embed'), function_calling: true, vision: false },
            })),
          },
        },
    },
    {
      method: 'POST',
      path: /^\/v1\/files$/,
      async handle(request) {
        const form = await new Response(new Uint8Array(request.body), { headers: { 'content-type': String(request.headers['content-type']) } }).formData();
        const file = form.get('file');
        if (!(file instanceof Blob)) return { status: 422, json: { detail: [{ type: 'missing', loc: ['body', 'file'], msg: 'Field required' }] } };
        const id = `file-${files.size + 1}`;
        const stored: FakeFile = { id, name: (file as File).name, content: await file.text(), purpose: String(form.get('purpose') ?? 'fine-tune') };
        files.set(id, stored);
        return {
          json: {
            id,
            object: 'file',
            bytes: Buffer.byteLength(stored.content),
            created_at: 1_763_000_000,
            filename: stored.name,
            purpose: stored.purpose,
            sample_type: 'batch_request',
            source: 'upload',
            num_lines: stored.content.split('\n').filter((l) => l.trim() !== '').length,
          },
        };
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/files\/([^/]+)\/content$/,
      handle(_request, match) {
        const file = files.get(match[1]);
        return file ? { text: file.content, contentType: 'application/octet-stream' } : mistralError(404, `File ${match[1]} not found`, 'not_found');
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/batch\/jobs$/,
      handle(request) {
        const body = request.json as { input_files: string[]; endpoint: string; model: string; metadata?: Record<string, string>; timeout_hours?: number };
        const input = files.get(body.input_files?.[0]);
        if (!input) return mistralError(404, 'Input file not found', 'not_found');
        const job: FakeJob = {
          id: `job-${String(jobs.length + 1).padStart(3, '0')}`,
          input_files: body.input_files,
          endpoint: body.endpoint,
          model: body.model,
          metadata: body.metadata ?? null,
          timeout_hours: body.timeout_hours ?? 24,
          created_at: 1_763_000_000 + jobs.length,
          status: 'QUEUED',
          polls: 0,
          output_file: null,
          error_file: null,
          failed: 0,
          lines: input.content.split('\n').filter((l) => l.trim() !== '').length,
        };
        jobs.push(job);
        return { json: jobObject(job) };
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/batch\/jobs$/,
      handle(request) {
        const page = Number(request.query.get('page') ?? 0);
        const size = Number(request.query.get('page_size') ?? 100);
        const ordered = [...jobs].reverse();
        return { json: { object: 'list', total: ordered.length, data: ordered.slice(page * size, page * size + size).map(jobObject) } };
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/batch\/jobs\/([^/]+)$/,
      handle(_request, match) {
        const job = findJob(match[1]);
        if (!job) return noJob(match[1]);
        job.polls += 1;
        if (job.status === 'CANCELLATION_REQUESTED') job.status = 'CANCELLED';
        else if (job.status === 'QUEUED' || job.status === 'RUNNING') {
          if (job.polls >= fake.pollsUntilDone) finish(job);
          else job.status = 'RUNNING';
        }
        return { json: jobObject(job) };
      },
    },
    {
      method: 'POST',
      path: /^\/v1\/batch\/jobs\/([^/]+)\/cancel$/,
      handle(_request, match) {
        const job = findJob(match[1]);
        if (!job) return noJob(match[1]);
        job.status = 'CANCELLATION_REQUESTED';
        return { json: jobObject(job) };
      },
    },
  ];
  fake.server = await VendorServer.start(routes);
  fake.close = () => fake.server.close();
  return fake;
}
