// A fake of Vertex AI (v1beta1) on loopback, with the Google Cloud token exchange in front of it:
// - POST /v1/token: an STS token exchange (what google-auth-library does for an `external_account` ADC file); it
//   checks the subject token read from the file and issues a bearer access token;
// - publisher model routes under /v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}: generateContent,
//   streamGenerateContent?alt=sse (Gemini's JSON shapes, from the gemini fake), predict (text-embedding models:
//   {instances} → {predictions: [{embeddings: {values, statistics}}]});
// - GET /v1beta1/publishers/google/models (the publisher's model list, paged);
// - express mode: the same model routes without projects/…/locations/…, with an API key (x-goog-api-key);
// - Claude (vertexaianthropic): POST /v1/projects/{p}/locations/{r}/publishers/anthropic/models/{m}:rawPredict and
//   :streamRawPredict, the Anthropic Messages body without `model`, with anthropic_version, answered with the
//   Anthropic fake's message and SSE events.
// Every model route needs `Authorization: Bearer <issued token>` (or the express key); errors are Google's.
// The fake comes with an Application Default Credentials file for its token exchange (stubAdcEnvironment).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { vi } from 'vitest';
import { fakeMessage, fakeMessageEvents } from './anthropic.ts';
import { fakeGeminiChunks, fakeGeminiResponse, googleError } from './gemini.ts';
import { fakeVector, VendorServer, type RecordedRequest, type Reply, type Route } from './vendor-server.ts';

export const SUBJECT_TOKEN = 'subject-token-from-the-workload';
export const EXPRESS_KEY = 'vertex-express-key';
export const VERTEX_MODELS = ['gemini-2.5-flash', 'text-embedding-005'];
/** The Google Cloud project stubAdcEnvironment sets. */
export const VERTEX_PROJECT = 'hub-proj';

export interface VertexFake {
  server: VendorServer;
  /** Access tokens the token endpoint issued, in order. */
  issued: string[];
  /** Its ADC file (writeAdcFile), in a folder of its own that close() removes. */
  adc: string;
  close(): Promise<void>;
}

/**
 * Writes an Application Default Credentials file of type `external_account` whose token exchange is the fake's
 * /v1/token and whose subject token is a file beside it; returns its path (for GOOGLE_APPLICATION_CREDENTIALS).
 */
function writeAdcFile(tokenUrl: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'hub-vertex-adc-'));
  const subject = path.join(dir, 'subject-token');
  writeFileSync(subject, SUBJECT_TOKEN);
  const adc = path.join(dir, 'adc.json');
  writeFileSync(
    adc,
    JSON.stringify({
      type: 'external_account',
      audience: '//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/hub-test/providers/fake',
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      token_url: tokenUrl,
      credential_source: { file: subject },
    }),
  );
  return adc;
}

export async function startVertexFake(): Promise<VertexFake> {
  const issued: string[] = [];
  const authorised = (request: RecordedRequest, express: boolean): Reply | null => {
    if (express) {
      return request.headers['x-goog-api-key'] === EXPRESS_KEY ? null : googleError(401, 'UNAUTHENTICATED', 'API keys are not supported by this API. Expected OAuth2 access token.');
    }
    const token = /^Bearer (.+)$/.exec(String(request.headers.authorization ?? ''))?.[1];
    if (!token || !issued.includes(token)) {
      return googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials. Expected OAuth 2 access token.');
    }
    return null;
  };
  const modelRoute = (action: string, handle: (request: RecordedRequest, model: string) => Reply): Route => ({
    method: 'POST',
    path: new RegExp(`^/v1beta1/(?:projects/[^/]+/locations/[^/]+/)?publishers/google/models/([^/:]+):${action}$`),
    handle: (request, match) => authorised(request, !request.path.includes('/projects/')) ?? handle(request, match[1]),
  });
  const routes: Route[] = [
    {
      method: 'POST',
      path: /^\/v1\/token$/,
      handle(request) {
        const form = new URLSearchParams(request.body.toString('utf8'));
        if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:token-exchange' || form.get('subject_token') !== SUBJECT_TOKEN) {
          return { status: 400, json: { error: 'invalid_grant', error_description: 'The subject token is invalid.' } };
        }
        const token = `ya29.fake-${issued.length + 1}`;
        issued.push(token);
        return { json: { access_token: token, issued_token_type: 'urn:ietf:params:oauth:token-type:access_token', token_type: 'Bearer', expires_in: 3600 } };
      },
    },
    modelRoute('generateContent', (request) => ({ json: fakeGeminiResponse(request.json as Record<string, unknown>) })),
    modelRoute('streamGenerateContent', (request) =>
      request.query.get('alt') === 'sse' ? { sse: fakeGeminiChunks(request.json as Record<string, unknown>) } : googleError(400, 'INVALID_ARGUMENT', 'only alt=sse is faked'),
    ),
    modelRoute('predict', (request) => {
      const body = request.json as { instances: { content: string }[]; parameters?: { outputDimensionality?: number } };
      return {
        json: {
          predictions: body.instances.map((instance) => ({
            embeddings: { values: fakeVector(instance.content, body.parameters?.outputDimensionality), statistics: { token_count: instance.content.length, truncated: false } },
          })),
          metadata: { billableCharacterCount: 0 },
        },
      };
    }),
    {
      method: 'POST',
      path: /^\/v1\/projects\/[^/]+\/locations\/[^/]+\/publishers\/anthropic\/models\/([^/:]+):(rawPredict|streamRawPredict)$/,
      handle(request, match) {
        const denied = authorised(request, false);
        if (denied) return denied;
        const body = request.json as Record<string, unknown>;
        if (body.model !== undefined || typeof body.anthropic_version !== 'string') {
          return googleError(400, 'INVALID_ARGUMENT', 'anthropic_version is required and the model belongs in the path');
        }
        const named = { ...body, model: match[1] };
        return match[2] === 'rawPredict' ? { json: fakeMessage(named) } : { sse: fakeMessageEvents(named) };
      },
    },
    {
      method: 'GET',
      path: /^\/v1beta1\/publishers\/google\/models$/,
      handle(request) {
        const denied = authorised(request, false);
        if (denied) return denied;
        const start = Number(request.query.get('pageToken') ?? 0);
        const page = VERTEX_MODELS.slice(start, start + 1).map((id) => ({ name: `publishers/google/models/${id}` }));
        return { json: { publisherModels: page, ...(start + 1 < VERTEX_MODELS.length ? { nextPageToken: String(start + 1) } : {}) } };
      },
    },
  ];
  const server = await VendorServer.start(routes);
  const adc = writeAdcFile(`${server.url}/v1/token`);
  return {
    server,
    issued,
    adc,
    async close() {
      await server.close();
      rmSync(path.dirname(adc), { recursive: true, force: true });
    },
  };
}

/**
 * Points Google's Application Default Credentials at the fake for the current tests (vi.stubEnv; vi.unstubAllEnvs
 * undoes it): its ADC file, project VERTEX_PROJECT in `location`, and no Google API key (which would mean express mode).
 */
export function stubAdcEnvironment(fake: VertexFake, location: string): void {
  vi.stubEnv('GOOGLE_APPLICATION_CREDENTIALS', fake.adc);
  vi.stubEnv('GOOGLE_CLOUD_PROJECT', VERTEX_PROJECT);
  vi.stubEnv('GOOGLE_CLOUD_LOCATION', location);
  vi.stubEnv('GOOGLE_API_KEY', undefined);
  vi.stubEnv('GEMINI_API_KEY', undefined);
}
