import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Principal } from '../auth.ts';
import { GatewayError, invalidRequest } from '../errors.ts';
import { keyModelRefusal, modelAllowed, type CallStart, type CallTicket } from '../ledger.ts';
import { BUDGET_WARNING_HEADER, budgetWarningHeader } from '../budget-warning.ts';
import { rateLimitHeaders } from '../rate-limit.ts';
import { callWithFallback, splitModel, type CallPlan, type CallTarget } from '../model-router.ts';
import { CALL_OPTION_FIELDS, upstreamErrorOf, type AnthropicStreamEvent, type ChatCompletionChunk, type ResponsesStreamEvent } from '../upstream.ts';
import type { GatewayContext } from './context.ts';
import { checkedEmbeddings, embeddingsReply } from './embeddings-answer.ts';
import { principalOf } from './front-door.ts';
import { estimatedSearchUnits, parseRerankBody, rerankReply } from './rerank-body.ts';
import { objectBody } from './validation.ts';

type Body = Record<string, unknown>;

/** What the ledger needs of a call's plan: its first target and, for a model route, its name and every target. */
function targetsOf(plan: CallPlan): Pick<CallStart, 'provider' | 'model' | 'route'> {
  const [first] = plan.targets;
  return { provider: first.provider, model: first.model, route: plan.route === null ? null : { name: plan.route, targets: plan.targets } };
}

/** A forwarded body may not set how the gateway calls the provider (CALL_OPTION_FIELDS). */
function checkNoCallOptions(body: Body): void {
  const field = CALL_OPTION_FIELDS.find((name) => Object.hasOwn(body, name));
  if (field) throw invalidRequest(`"${field}" is not a request field: the gateway decides how it calls providers`, field);
}

function checkMessages(messages: unknown): void {
  if (!Array.isArray(messages) || messages.length === 0) throw invalidRequest('"messages" must be a non-empty array', 'messages');
  messages.forEach((message, i) => {
    if (message === null || typeof message !== 'object' || typeof (message as Body).role !== 'string') {
      throw invalidRequest(`messages[${i}] must be an object with a string "role"`, `messages[${i}].role`);
    }
  });
}

/** The client's output limit (the larger, should it send both fields), or null for none. */
function maxTokensOf(body: Body, fields: readonly string[] = ['max_completion_tokens', 'max_tokens']): number | null {
  const limits = fields.map((field) => body[field]).filter((value): value is number => typeof value === 'number' && Number.isFinite(value) && value > 0);
  return limits.length > 0 ? Math.max(...limits) : null;
}

/**
 * The body with the call's output limit under `field` (what this provider and API read), when the ledger set one:
 * the output tokens it reserved, so that the answer cannot cost more than the hold. The other limit fields, absent
 * or null, are dropped.
 */
function withOutputLimit(body: Body, ticket: CallTicket, field: string, fields: readonly string[]): Body {
  if (ticket.outputLimit === null) return body;
  const limited = Object.fromEntries(Object.entries(body).filter(([name]) => !fields.includes(name)));
  return { ...limited, [field]: ticket.outputLimit };
}

const CHAT_LIMIT_FIELDS = ['max_completion_tokens', 'max_tokens'];

/** The fields of an Anthropic count_tokens request (besides model). */
const COUNT_TOKENS_FIELDS = ['messages', 'system', 'tools', 'tool_choice', 'thinking', 'mcp_servers', 'output_config', 'context_management'];

/**
 * All prompt tokens of an Anthropic-format usage: `input_tokens` counts only those after the last cache breakpoint,
 * cache reads and writes come apart. Recorded like OpenAI's `prompt_tokens` (which includes cached tokens) and priced
 * at the model's input price, since pricing has no cache rates (docs/gateway.md).
 */
function promptTokensOf(usage: { input_tokens?: number | null; cache_creation_input_tokens?: number | null; cache_read_input_tokens?: number | null } | null | undefined): number {
  return (usage?.input_tokens ?? 0) + (usage?.cache_creation_input_tokens ?? 0) + (usage?.cache_read_input_tokens ?? 0);
}

/** The embeddings `dimensions`: a positive integer, or absent (null counts as absent, as in OpenAI's API). */
function dimensionsOf(body: Body): number | undefined {
  const value = body.dimensions;
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw invalidRequest(`"dimensions" must be a positive integer, got ${JSON.stringify(value)}`, 'dimensions');
  }
  return value;
}

const estimateTokens = (value: unknown) => Math.ceil(JSON.stringify(value ?? '').length / 4);

/** How a stream's events are written: chat completions (data only, then [DONE]), Anthropic's and the Responses API's (named events). */
type StreamDialect = 'chat' | 'anthropic' | 'responses';
const FINAL_EVENTS: Record<Exclude<StreamDialect, 'chat'>, string[]> = {
  anthropic: ['message_stop'],
  responses: ['response.completed', 'response.incomplete', 'response.failed'],
};

/** What a stream has told so far: the provider's token counts (0 until it reports them) and the text characters sent. */
interface StreamCounts {
  promptTokens: number;
  completionTokens: number;
  streamedChars: number;
}

/** One forwarded model call between its reservation and its usage row. */
interface ForwardedCall {
  request: FastifyRequest;
  reply: FastifyReply;
  plan: CallPlan;
  ticket: CallTicket;
  /** Aborted when the client goes away before the answer is complete (clientSignal). */
  controller: AbortController;
}

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  'x-accel-buffering': 'no',
};

/** Which model names a principal may call: a virtual key those of its list and its owner's, the master key all. */
function callableBy(principal: Principal): (id: string) => boolean {
  const lists = principal.kind === 'virtual' ? [principal.key.allowed_models, principal.ownerAllowedModels] : [];
  return (id) => lists.every((allowed) => modelAllowed(id, allowed));
}

/** /v1/chat/completions, /v1/embeddings, /v1/rerank, /v1/models and the Anthropic-format /v1/messages. */
export function registerModelRoutes(app: FastifyInstance, context: GatewayContext): void {
  const { ledger, upstream, router } = context;
  /** Either credential, checked before the body is read (front-door.ts). */
  const anyKey = { config: { credential: 'any' } } as const;
  /** A model route as /v1/models shows it; the master key (operators, the dashboard) also sees where it goes. */
  const routeModel = (id: string, principal: Principal) => ({
    id,
    object: 'model',
    created: 0,
    owned_by: 'gateway',
    ...(principal.kind === 'master' ? { targets: router.targetsOf(id) } : {}),
  });

  /**
   * Reserves the call's budget (its first target and route from the plan) and ties it to the client's connection:
   * a client that leaves must stop (and not pay for) the call.
   */
  async function beginCall(request: FastifyRequest, reply: FastifyReply, plan: CallPlan, start: Omit<CallStart, 'provider' | 'model' | 'route' | 'requestId'>): Promise<ForwardedCall> {
    const ticket = await ledger.begin({ ...start, ...targetsOf(plan), requestId: request.id });
    // a rate-limited key's window, on the answer whatever it is (a refusal's 429 carries them in its error)
    if (ticket.rateLimit) reply.headers(rateLimitHeaders(ticket.rateLimit, Date.now()));
    // a budget past its soft budget: the call goes ahead, the client is told
    if (ticket.budgetWarnings.length > 0) reply.header(BUDGET_WARNING_HEADER, budgetWarningHeader(ticket.budgetWarnings));
    return { request, reply, plan, ticket, controller: clientSignal(reply) };
  }

  /**
   * Tries the call's targets in turn until one answers (see callWithFallback); each fallback is counted and logged.
   * A call that none of them answered gets its usage row (failedCall) and throws the error to answer with.
   */
  async function callTargets<T>({ request, plan, ticket, controller }: ForwardedCall, attempt: (target: CallTarget) => Promise<T>): Promise<T> {
    try {
      return await callWithFallback(plan, ticket, controller.signal, attempt, (failure, target) => {
        context.metrics.routeFallbacks.inc({ route: plan.route ?? '', provider: target.provider, code: failure.code });
        request.log.warn({ route: plan.route, provider: target.provider, model: target.model, status: failure.status, code: failure.code }, `model route target failed, trying the next: ${failure.message}`);
      });
    } catch (error) {
      throw await failedCall(ticket, error, controller.signal);
    }
  }

  /**
   * A call that failed before anything was answered: its usage row, and the error to answer with. A provider's
   * refusal costs nothing; a client that went away (its signal aborted) is `cancelled` and pays the estimated prompt,
   * which the provider was sent and charges for — else aborting just before the answer would dodge every budget.
   */
  async function failedCall(ticket: CallTicket, error: unknown, signal: AbortSignal): Promise<GatewayError> {
    const failure = upstreamErrorOf(error, ticket.target.provider);
    const cancelled = signal.aborted;
    await ledger.finish(ticket, {
      status: cancelled ? 'cancelled' : 'error',
      statusCode: cancelled ? 499 : failure.status,
      promptTokens: cancelled ? ticket.start.estimatedPromptTokens : 0,
      completionTokens: 0,
      searchUnits: cancelled ? (ticket.start.estimatedSearchUnits ?? 0) : 0,
      reason: cancelled ? 'client_closed_request' : failure.code,
    });
    return failure;
  }

  /** Runs one non-streaming call between its reservation and its usage row; the row is committed before the reply. */
  async function answer<T>(
    call: ForwardedCall,
    attempt: (target: CallTarget) => Promise<T>,
    usage: (result: T) => { prompt: number; completion: number; searchUnits?: number },
  ): Promise<T> {
    const result = await callTargets(call, attempt);
    const { prompt, completion, searchUnits } = usage(result);
    await ledger.finish(call.ticket, { status: 'success', statusCode: 200, promptTokens: prompt, completionTokens: completion, searchUnits });
    return result;
  }

  /**
   * Opens a streaming call and answers with its events (sse). A target that fails before its first event is replaced
   * by the next (callTargets); once an event is sent there is no way back.
   */
  async function answerStream<T extends object>(
    call: ForwardedCall,
    open: (target: CallTarget) => Promise<AsyncIterable<T>>,
    dialect: StreamDialect,
    observe: (event: T, counts: StreamCounts) => boolean,
  ): Promise<FastifyReply> {
    const events = await callTargets(call, open);
    return sendEvents(call, sse(call, events, observe, dialect));
  }

  /** Aborted when the client goes away before the answer is complete. */
  function clientSignal(reply: FastifyReply): AbortController {
    const controller = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) controller.abort();
    });
    return controller;
  }

  app.post('/v1/chat/completions', anyKey, async (request, reply) => {
    const principal = principalOf(request);
    const body = objectBody(request.body);
    const plan = router.plan(body.model);
    checkMessages(body.messages);
    checkNoCallOptions(body);
    const { user, model: _model, ...rest } = body;
    // With a virtual key the client may still send its own end-user id; it is passed on, not interpreted.
    const forwarded: Body = principal.kind === 'virtual' && user !== undefined ? { ...rest, user } : rest;
    const call = await beginCall(request, reply, plan, {
      principal,
      user,
      endpoint: 'chat.completions',
      estimatedPromptTokens: estimateTokens(body.messages),
      maxOutputTokens: maxTokensOf(body),
    });
    const { ticket } = call;
    const { signal } = call.controller;
    const limited = (target: CallTarget, chatBody: Body) => withOutputLimit(chatBody, ticket, upstream.chatOutputLimitField(target.connection), CHAT_LIMIT_FIELDS);
    if (body.stream !== true) {
      return answer(
        call,
        (target) => upstream.chat(target.connection, target.model, limited(target, forwarded), signal),
        // A provider that reports no usage is billed by estimate, as its streams are, not for nothing.
        (completion) =>
          completion.usage
            ? { prompt: completion.usage.prompt_tokens ?? 0, completion: completion.usage.completion_tokens ?? 0 }
            : { prompt: ticket.start.estimatedPromptTokens, completion: Math.ceil(completion.choices.reduce((n, choice) => n + (choice.message?.content?.length ?? 0), 0) / 4) },
      );
    }
    const clientWantsUsage = (body.stream_options as Body | undefined)?.include_usage === true;
    const streamBody = { ...forwarded, stream_options: { ...(body.stream_options as Body | undefined), include_usage: true } };
    return answerStream<ChatCompletionChunk>(call, (target) => upstream.chatStream(target.connection, target.model, limited(target, streamBody), signal), 'chat', (chunk, counts) => {
      if (chunk.usage) {
        counts.promptTokens = chunk.usage.prompt_tokens;
        counts.completionTokens = chunk.usage.completion_tokens;
      }
      for (const choice of chunk.choices ?? []) counts.streamedChars += choice.delta?.content?.length ?? 0;
      // The usage-only chunk goes to clients that asked for it, as the provider would have done.
      return !(chunk.usage && (chunk.choices ?? []).length === 0 && !clientWantsUsage);
    });
  });

  app.post('/v1/embeddings', anyKey, async (request, reply) => {
    const principal = principalOf(request);
    const body = objectBody(request.body);
    const plan = router.plan(body.model);
    const input = body.input;
    const inputs = typeof input === 'string' ? [input] : input;
    if (!Array.isArray(inputs) || inputs.length === 0 || !inputs.every((item) => typeof item === 'string')) {
      throw invalidRequest('"input" must be a string or a non-empty array of strings', 'input');
    }
    const format = body.encoding_format ?? 'float';
    if (format !== 'float' && format !== 'base64') throw invalidRequest('"encoding_format" must be "float" or "base64"', 'encoding_format');
    const dimensions = dimensionsOf(body);
    const call = await beginCall(request, reply, plan, {
      principal,
      user: body.user,
      endpoint: 'embeddings',
      estimatedPromptTokens: estimateTokens(inputs),
      maxOutputTokens: 0,
    });
    const { signal } = call.controller;
    const response = await answer(
      call,
      // checked inside the attempt: an answer without one vector per input is a failed call (502, an error row)
      async (target) =>
        checkedEmbeddings(await upstream.embeddings(target.connection, target.model, inputs as string[], signal, dimensions !== undefined ? { dimensions } : {}), inputs.length, target.provider),
      (result) => ({ prompt: result.usage?.prompt_tokens ?? call.ticket.start.estimatedPromptTokens, completion: 0 }),
    );
    // The openai client asks for base64 by default and decodes little-endian float32.
    return embeddingsReply(response, format);
  });

  /** Cohere's rerank; also at /v2/rerank, the path of the Cohere v2 client. Billed by tokens and search units (pricing). */
  const rerank = async (request: FastifyRequest, reply: FastifyReply) => {
    const principal = principalOf(request);
    const body = objectBody(request.body);
    const plan = router.plan(body.model);
    const { user, rerank: query } = parseRerankBody(body);
    const call = await beginCall(request, reply, plan, {
      principal,
      user,
      endpoint: 'rerank',
      // a cross-encoder reads the query with every document
      estimatedPromptTokens: estimateTokens(query.documents.map((document) => [query.query, document])),
      maxOutputTokens: 0,
      estimatedSearchUnits: estimatedSearchUnits(query.documents.length),
    });
    const { signal } = call.controller;
    const result = await answer(
      call,
      (target) => upstream.rerank(target.connection, target.model, query, signal),
      // Cohere bills search units and may count no tokens: those are estimated, as for any answer without usage
      (ranking) => ({ prompt: ranking.usage?.prompt_tokens ?? call.ticket.start.estimatedPromptTokens, completion: 0, searchUnits: ranking.meta?.billed_units.search_units ?? 0 }),
    );
    return rerankReply(result);
  };
  app.post('/v1/rerank', anyKey, rerank);
  app.post('/v2/rerank', anyKey, rerank);

  app.get<{ Querystring: { provider?: string } }>('/v1/models', anyKey, async (request) => {
    const principal = principalOf(request);
    const callable = callableBy(principal);
    const wanted = request.query.provider;
    const providers = wanted ? [wanted] : upstream.providers;
    if (wanted && !upstream.providers.includes(wanted)) throw invalidRequest(`Provider "${wanted}" is not configured on this gateway`, 'provider', 'unknown_provider');
    const signal = AbortSignal.timeout(30_000);
    const results = await Promise.allSettled(providers.map((provider) => upstream.models(provider, signal)));
    // The model routes' public names first (not with ?provider=: a route is no provider's); a provider model of the
    // same name is the route's, as a call to that name is.
    const routes = wanted ? [] : router.names;
    // the master key (operators, the dashboard) also sees where each route goes; a virtual key only its names
    const data: Record<string, unknown>[] = routes.filter(callable).map((id) => routeModel(id, principal));
    const failures: GatewayError[] = [];
    results.forEach((result, i) => {
      if (result.status === 'rejected') failures.push(upstreamErrorOf(result.reason, providers[i]));
      else {
        for (const model of result.value) {
          const id = `${providers[i]}:${model.id}`;
          if (callable(id) && !routes.includes(id)) data.push({ ...model, id });
        }
      }
    });
    // One provider being down should not hide the others; all of them down is the provider's failure.
    if (data.length === 0 && failures.length > 0) throw failures[0];
    for (const failure of failures) request.log.warn({ code: failure.code }, failure.message);
    return { object: 'list', data };
  });

  /**
   * One model, as the list shows it (openai's `models.retrieve`): a model route's name, or a provider's model as
   * `provider:model` or `provider/model` (the wildcard takes ids with '/' whether the client encodes it or not). An
   * unknown id, an unconfigured provider or a model the key may not call is 404 model_not_found, as OpenAI answers.
   */
  app.get<{ Params: { '*': string } }>('/v1/models/*', anyKey, async (request) => {
    const principal = principalOf(request);
    const callable = callableBy(principal);
    const id = request.params['*'];
    const notFound = () => new GatewayError(404, 'invalid_request_error', 'model_not_found', `The model "${id}" does not exist or this key may not use it`, { param: 'model' });
    if (router.names.includes(id)) {
      if (!callable(id)) throw notFound();
      return routeModel(id, principal);
    }
    let target: { provider: string; model: string };
    try {
      target = splitModel(id, upstream.providers);
    } catch {
      throw notFound();
    }
    const canonical = `${target.provider}:${target.model}`;
    if (!callable(canonical)) throw notFound();
    let models: Awaited<ReturnType<typeof upstream.models>>;
    try {
      models = await upstream.models(target.provider, AbortSignal.timeout(30_000));
    } catch (error) {
      throw upstreamErrorOf(error, target.provider);
    }
    const model = models.find((candidate) => candidate.id === target.model);
    if (!model) throw notFound();
    return { ...model, id: canonical };
  });

  app.post('/v1/responses', anyKey, async (request, reply) => {
    const principal = principalOf(request);
    const body = objectBody(request.body);
    const plan = router.plan(body.model);
    if (typeof body.input !== 'string' && !(Array.isArray(body.input) && body.input.length > 0)) {
      throw invalidRequest('"input" is required: a string or a non-empty array of input items', 'input');
    }
    checkNoCallOptions(body);
    const { user, model: _model, stream: _stream, ...rest } = body;
    const unlimited: Body = principal.kind === 'virtual' && user !== undefined ? { ...rest, user } : rest;
    const call = await beginCall(request, reply, plan, {
      principal,
      user,
      endpoint: 'responses',
      estimatedPromptTokens: estimateTokens([body.instructions, body.input]),
      maxOutputTokens: maxTokensOf(body, ['max_output_tokens']),
    });
    const { ticket } = call;
    const { signal } = call.controller;
    const forwarded = withOutputLimit(unlimited, ticket, 'max_output_tokens', ['max_output_tokens']);
    if (body.stream !== true) {
      return answer(
        call,
        (target) => upstream.responses(target.connection, target.model, forwarded, signal),
        (response) =>
          response.usage
            ? { prompt: response.usage.input_tokens ?? 0, completion: response.usage.output_tokens ?? 0 }
            : { prompt: ticket.start.estimatedPromptTokens, completion: Math.ceil((response.output_text ?? JSON.stringify(response.output ?? '')).length / 4) },
      );
    }
    return answerStream<ResponsesStreamEvent>(call, (target) => upstream.responsesStream(target.connection, target.model, forwarded, signal), 'responses', (event, counts) => {
      if (event.type === 'response.output_text.delta' && typeof event.delta === 'string') counts.streamedChars += event.delta.length;
      const usage = event.response?.usage;
      if (usage) {
        counts.promptTokens = usage.input_tokens ?? counts.promptTokens;
        counts.completionTokens = usage.output_tokens ?? counts.completionTokens;
      }
      return true;
    });
  });

  app.post('/v1/messages', anyKey, async (request, reply) => {
    const principal = principalOf(request);
    const body = objectBody(request.body);
    const plan = router.plan(body.model);
    checkMessages(body.messages);
    checkNoCallOptions(body);
    if (typeof body.max_tokens !== 'number') throw invalidRequest('"max_tokens" is required (Anthropic Messages format)', 'max_tokens');
    const metadata = body.metadata as Body | undefined;
    const user = body.user ?? metadata?.user_id;
    const { user: _user, model: _model, stream: _stream, ...forwarded } = body;
    const call = await beginCall(request, reply, plan, {
      principal,
      user,
      endpoint: 'messages',
      estimatedPromptTokens: estimateTokens([body.system, body.messages]),
      // required here, so the client's limit is always the provider's
      maxOutputTokens: Math.max(0, body.max_tokens),
    });
    const { ticket } = call;
    const { signal } = call.controller;
    if (body.stream !== true) {
      return answer(
        call,
        (target) => upstream.messages(target.connection, target.model, forwarded, signal),
        (message) =>
          message.usage
            ? { prompt: promptTokensOf(message.usage), completion: message.usage.output_tokens ?? 0 }
            : { prompt: ticket.start.estimatedPromptTokens, completion: Math.ceil(JSON.stringify(message.content ?? '').length / 4) },
      );
    }
    return answerStream<AnthropicStreamEvent>(call, (target) => upstream.messagesStream(target.connection, target.model, forwarded, signal), 'anthropic', (event, counts) => {
      if (event.type === 'message_start') counts.promptTokens = promptTokensOf(event.message.usage);
      if (event.type === 'message_delta') {
        counts.completionTokens = event.usage?.output_tokens ?? counts.completionTokens;
        counts.promptTokens = promptTokensOf(event.usage) || counts.promptTokens;
      }
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') counts.streamedChars += event.delta.text.length;
      return true;
    });
  });

  /**
   * Anthropic's count_tokens (`client.messages.countTokens`; Claude Code calls it): authenticated and held to the key's
   * allowed_models like a call, but not billed, not rate-limited and without a usage row. The model route's first
   * target (or the provider:model) counts where Hub has count_tokens (Anthropic); any other provider gets an estimate
   * (a token per 4 characters of the system prompt, messages and tools' JSON), flagged `x-token-count-estimate: true`.
   */
  app.post('/v1/messages/count_tokens', anyKey, async (request, reply) => {
    const principal = principalOf(request);
    const body = objectBody(request.body);
    const plan = router.plan(body.model);
    checkMessages(body.messages);
    checkNoCallOptions(body);
    const [target] = plan.targets;
    const name = plan.route ?? `${target.provider}:${target.model}`;
    const refused = keyModelRefusal(principal, name);
    if (refused) throw refused;
    // what count_tokens reads; max_tokens, stream, metadata… of a Messages body copied as it is are left out
    const forwarded = Object.fromEntries(Object.entries(body).filter(([field]) => COUNT_TOKENS_FIELDS.includes(field)));
    const signal = AbortSignal.any([clientSignal(reply).signal, AbortSignal.timeout(30_000)]);
    let counted: { input_tokens: number } | null;
    try {
      counted = await upstream.countTokens(target.connection, target.model, forwarded, signal);
    } catch (error) {
      throw upstreamErrorOf(error, target.provider);
    }
    if (counted) return { input_tokens: counted.input_tokens };
    reply.header('x-token-count-estimate', 'true');
    return { input_tokens: estimateTokens([body.system, body.messages, body.tools]) };
  });

  /**
   * Sends the events. A client that left just as the provider's first event arrived gets its stream destroyed
   * before the generator starts, so the generator's own cleanup never runs: the row (cancelled, no tokens known)
   * and the release of the budget hold are written here instead.
   */
  function sendEvents({ reply, ticket, controller }: ForwardedCall, events: AsyncGenerator<string>): FastifyReply {
    const readable = Readable.from(events);
    readable.on('close', () => {
      if (ticket.finished) return;
      controller.abort();
      void ledger.finish(ticket, { status: 'cancelled', statusCode: 499, promptTokens: ticket.start.estimatedPromptTokens, completionTokens: 0, reason: 'client_closed_request' });
    });
    return reply.code(200).headers(SSE_HEADERS).send(readable);
  }

  /**
   * Server-Sent Events from an upstream stream. The usage row is committed before the last event (`[DONE]` for
   * OpenAI, the provider's message_stop for Anthropic); an upstream failure mid-stream ends the stream with an
   * error event; a client that goes away aborts the upstream call and the row records what was streamed so far.
   */
  async function* sse<T extends object>(
    { ticket, controller }: ForwardedCall,
    stream: AsyncIterable<T>,
    observe: (event: T, counts: StreamCounts) => boolean,
    dialect: StreamDialect,
  ): AsyncGenerator<string> {
    const counts: StreamCounts = { promptTokens: 0, completionTokens: 0, streamedChars: 0 };
    // What the provider did not report is estimated: the prompt as reserved, a token for every 4 characters sent.
    const tokens = () => ({ promptTokens: counts.promptTokens || ticket.start.estimatedPromptTokens, completionTokens: counts.completionTokens || Math.ceil(counts.streamedChars / 4) });
    const chat = dialect === 'chat';
    const format = (event: T) => (chat ? `data: ${JSON.stringify(event)}\n\n` : `event: ${(event as { type?: string }).type}\ndata: ${JSON.stringify(event)}\n\n`);
    let held: T | null = null;
    ledger.streaming(ticket, tokens);
    try {
      for await (const event of stream) {
        if (!observe(event, counts)) continue;
        // The event that ends the stream (Anthropic's message_stop, the Responses API's response.completed…) is held
        // back until the usage row is committed; chat streams end with [DONE] instead.
        if (!chat && FINAL_EVENTS[dialect].includes((event as { type?: string }).type ?? '')) {
          held = event;
          continue;
        }
        yield format(event);
      }
      const { promptTokens, completionTokens } = tokens();
      await ledger.finish(ticket, { status: 'success', statusCode: 200, promptTokens, completionTokens });
      yield chat ? 'data: [DONE]\n\n' : held ? format(held) : '';
    } catch (error) {
      const failure = upstreamErrorOf(error, ticket.target.provider);
      const { promptTokens, completionTokens } = tokens();
      const cancelled = controller.signal.aborted;
      await ledger.finish(ticket, {
        status: cancelled ? 'cancelled' : 'error',
        statusCode: cancelled ? 499 : failure.status,
        promptTokens,
        completionTokens,
        reason: cancelled ? 'client_closed_request' : failure.code,
      });
      if (!cancelled) {
        if (chat) yield `data: ${JSON.stringify(failure.body())}\n\n`;
        else if (dialect === 'responses') yield `event: error\ndata: ${JSON.stringify({ type: 'error', code: failure.code, message: failure.message, param: null })}\n\n`;
        else yield `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: failure.type, message: failure.message } })}\n\n`;
      }
    } finally {
      if (!ticket.finished) {
        controller.abort();
        const { promptTokens, completionTokens } = tokens();
        void ledger.finish(ticket, { status: 'cancelled', statusCode: 499, promptTokens, completionTokens, reason: 'client_closed_request' });
      }
    }
  }
}
