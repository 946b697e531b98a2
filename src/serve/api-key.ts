import { createHash, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../encoder/errors.ts';

/** What RFC 6750 allows in a bearer token (token68): the key travels as one. */
const BEARER_TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** The HTTP routes a key leaves open: probes and scrapers check them without credentials (as in text-embeddings-inference). */
export const OPEN_HTTP_ROUTES: ReadonlySet<string> = new Set(['/health', '/ping', '/livez', '/metrics']);

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

/** Why a request was refused: no key at all, or another key. Both are 401. */
export type ApiKeyRefusal = 'missing' | 'invalid';

export const API_KEY_MESSAGES: Record<ApiKeyRefusal, string> = {
  missing: 'Unauthorized: this server requires an API key; send it as "Authorization: Bearer <key>"',
  invalid: 'Unauthorized: the API key is not valid',
};

/**
 * The key `serve --api-key` requires of every request that runs the model or describes it (docs/http-api.md,
 * "API key"). Compared by SHA-256 digest in constant time, so that the time of a refusal says nothing of the key.
 */
export class ApiKey {
  readonly #digest: Buffer;

  constructor(key: string) {
    if (!BEARER_TOKEN.test(key)) {
      throw new ConfigError('the API key must be a bearer token: letters, digits and - . _ ~ + / (then = padding), not empty');
    }
    this.#digest = sha256(key);
  }

  /** Why an Authorization header (HTTP) or metadata value (gRPC) is refused, or null when it carries the key. */
  refusalOf(authorization: string | undefined): ApiKeyRefusal | null {
    if (!authorization) return 'missing';
    const token = /^Bearer +(\S+) *$/i.exec(authorization)?.[1];
    return token !== undefined && timingSafeEqual(sha256(token), this.#digest) ? null : 'invalid';
  }
}
