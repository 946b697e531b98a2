import type { FastifyInstance } from 'fastify';
import type { Predictor } from '../../encoder/predictor.ts';
import { answerErrorsAs, JSON_TYPE } from './errors.ts';
import { sendJson } from './json-reply.ts';
import { predictBodyOf } from './predict-body.ts';
import { infinityRerank, isInfinityRerankBody } from './infinity.ts';
import { isTeiPredictBody, teiPredict, teiRerank } from './tei.ts';
import type { ServedModelNames } from '../model-names.ts';

/** Spec 2: `GET /health` answers the JSON string "OK!"; so does `GET /livez`, which a drain leaves at 200 (drain.ts). */
const HEALTH_BODY = JSON.stringify('OK!');

/** GET /health, GET /livez and GET /model (`metadata`), which every model's app has. */
export function registerHealthRoutes(app: FastifyInstance, metadata: () => unknown): void {
  app.get('/health', (_request, reply) => reply.type(JSON_TYPE).send(HEALTH_BODY));
  app.get('/livez', (_request, reply) => reply.type(JSON_TYPE).send(HEALTH_BODY));
  app.get('/model', (_request, reply) => reply.type(JSON_TYPE).send(JSON.stringify(metadata())));
}

/**
 * GET /health, GET /livez, GET /model, GET /openapi.json and POST /predict. /predict also answers text-embeddings-inference's
 * classification bodies where spec 2 would refuse them (tei.ts, isTeiPredictBody). /predict hands the parsed body to the predictor
 * as it is, but for null optional fields and TEI's options (predict-body.ts): the predictor validates it against
 * src/encoder/schemas.ts (the one source) and throws InputError with spec 2's message, which the error handler
 * turns into a 422. A second validation here, with fastify's ajv, would only produce other messages for the same
 * schema.
 */
export function registerModelRoutes(app: FastifyInstance, predictor: Predictor, names: ServedModelNames, openApiJson: () => Promise<string>): void {
  registerHealthRoutes(app, () => predictor.metadata());
  app.get('/openapi.json', async (_request, reply) => reply.type(JSON_TYPE).send(await openApiJson()));
  app.post('/predict', async (request, reply) => {
    // a text-embeddings-inference body that spec 2 would refuse: answered, and refused, as TEI does
    if (isTeiPredictBody(request.body, predictor)) {
      answerErrorsAs(request, 'tei');
      return sendJson(reply, await teiPredict(request.body, predictor));
    }
    // Float32Array outputs are written as shortest float32 decimals (fewer bytes, and faster than JSON.stringify of
    // number[] on large embedding responses, where serialization is the dominant HTTP cost), large ones in pieces.
    return sendJson(reply, await predictor.predict(predictBodyOf(request.body, predictor.modelType)));
  });

  // TEI's body (`texts`) or Infinity's (`documents`): each answered, and refused, as its server does
  app.post('/rerank', async (request, reply) => {
    if (isInfinityRerankBody(request.body)) {
      answerErrorsAs(request, 'infinity');
      return sendJson(reply, await infinityRerank(request.body, predictor, names));
    }
    return sendJson(reply, await teiRerank(request.body, predictor));
  });
}
