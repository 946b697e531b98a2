import type { FastifyInstance, onRequestHookHandler, RouteHandlerMethod } from 'fastify';
import { POOLED_MODEL_TYPES } from '../../encoder/config.ts';
import type { Predictor } from '../../encoder/predictor.ts';
import { READINESS_ROUTES } from './drain.ts';
import { answerErrorsAs, JSON_TYPE, type ErrorDialect } from './errors.ts';
import { sendJson } from './json-reply.ts';
import { predictBodyOf } from './predict-body.ts';
import { infinityRerank, isInfinityRerankBody } from './infinity.ts';
import { isTeiPredictBody, isTeiReranker, teiEmbedRoute, teiPredict, teiRerank } from './tei.ts';
import type { ServedModelNames } from '../model-names.ts';

/**
 * text-embeddings-inference's default route, where the Hugging Face inference clients send an endpoint's requests,
 * and the one SageMaker calls: each model kind answers them as its own route (a text model: below; an image
 * classifier: image-app.ts).
 */
export const DEFAULT_ROUTES = ['/', '/invocations'] as const;

/** Spec 2: `GET /health` answers the JSON string "OK!"; so do `GET /ping` and `GET /livez`. */
const HEALTH_BODY = JSON.stringify('OK!');

/** GET /health, GET /ping, GET /livez and GET /model (`metadata`), which every model's app has. */
export function registerHealthRoutes(app: FastifyInstance, metadata: () => unknown): void {
  for (const route of READINESS_ROUTES) app.get(route, (_request, reply) => reply.type(JSON_TYPE).send(HEALTH_BODY));
  app.get('/livez', (_request, reply) => reply.type(JSON_TYPE).send(HEALTH_BODY));
  app.get('/model', (_request, reply) => reply.type(JSON_TYPE).send(JSON.stringify(metadata())));
}

/**
 * GET /health, GET /ping, GET /livez, GET /model, GET /openapi.json, POST /predict, POST /rerank, and TEI's default route
 * (POST / and /invocations). /predict also answers text-embeddings-inference's
 * classification bodies where spec 2 would refuse them (tei.ts, isTeiPredictBody). /predict hands the parsed body to the predictor
 * as it is, but for null optional fields and TEI's options (predict-body.ts): the predictor validates it against
 * src/encoder/schemas.ts (the one source) and throws InputError with spec 2's message, which the error handler
 * turns into a 422. A second validation here, with fastify's ajv, would only produce other messages for the same
 * schema.
 */
export function registerModelRoutes(app: FastifyInstance, predictor: Predictor, names: ServedModelNames, openApiJson: () => Promise<string>): void {
  registerHealthRoutes(app, () => predictor.metadata());
  app.get('/openapi.json', async (_request, reply) => reply.type(JSON_TYPE).send(await openApiJson()));
  const predict = predictRoute(predictor);
  const rerank = rerankRoute(predictor, names);
  app.post('/predict', predict);
  app.post('/rerank', rerank);
  // text-embeddings-inference's default route, POST / (and SageMaker's POST /invocations), where the Hugging Face
  // inference clients send an endpoint's requests: the route of the model's kind, answered and refused as that route
  // is (TEI's errors from the start for /embed and /rerank, whose paths say so; /predict chooses by the body). Chosen
  // at the first request: a server still loading its model knows its labels only then.
  let target: { route: RouteHandlerMethod; dialect: ErrorDialect | null } | undefined;
  const targetOf = () =>
    (target ??= POOLED_MODEL_TYPES.includes(predictor.modelType)
      ? { route: teiEmbedRoute(predictor), dialect: 'tei' }
      : isTeiReranker(predictor.metadata())
        ? { route: rerank, dialect: 'tei' }
        : { route: predict, dialect: null });
  const onRequest: onRequestHookHandler = (request, _reply, done) => {
    const { dialect } = targetOf();
    if (dialect) answerErrorsAs(request, dialect);
    done();
  };
  const defaultRoute: RouteHandlerMethod = function (request, reply) {
    return targetOf().route.call(this, request, reply);
  };
  for (const path of DEFAULT_ROUTES) app.post(path, { onRequest }, defaultRoute);
}

/** POST /predict: spec 2's, or text-embeddings-inference's classification body where spec 2 would refuse it. */
function predictRoute(predictor: Predictor): RouteHandlerMethod {
  return async (request, reply) => {
    // a text-embeddings-inference body that spec 2 would refuse: answered, and refused, as TEI does
    if (isTeiPredictBody(request.body, predictor)) {
      answerErrorsAs(request, 'tei');
      return sendJson(reply, await teiPredict(request.body, predictor));
    }
    // Float32Array outputs are written as shortest float32 decimals (fewer bytes, and faster than JSON.stringify of
    // number[] on large embedding responses, where serialization is the dominant HTTP cost), large ones in pieces.
    return sendJson(reply, await predictor.predict(predictBodyOf(request.body, predictor.modelType)));
  };
}

/** POST /rerank: TEI's body (`texts`) or Infinity's (`documents`), each answered, and refused, as its server does. */
function rerankRoute(predictor: Predictor, names: ServedModelNames): RouteHandlerMethod {
  return async (request, reply) => {
    if (isInfinityRerankBody(request.body)) {
      answerErrorsAs(request, 'infinity');
      return sendJson(reply, await infinityRerank(request.body, predictor, names));
    }
    return sendJson(reply, await teiRerank(request.body, predictor));
  };
}
