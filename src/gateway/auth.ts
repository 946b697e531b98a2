import { GatewayError } from './errors.ts';
import { sameDigest, secretDigest, VIRTUAL_KEY_PREFIX } from './keys.ts';
import type { GatewayStore, KeyRecord } from './storage/index.ts';
import { isoTime } from './time.ts';

/** Who sent a request: the master key holder, or the holder of one virtual key (with its owner's budget, if any). */
export type Principal =
  | { kind: 'master' }
  | { kind: 'virtual'; key: KeyRecord; ownerBudgetId: string | null; /** The owner's allowed_models (null: every model). */ ownerAllowedModels: string[] | null };

export type Headers = Record<string, string | string[] | undefined>;

const BEARER = /^Bearer +(\S+)$/i;

const unauthorized = (code: string, message: string) => new GatewayError(401, 'authentication_error', code, message);

/**
 * The token a request presents: X-Hub-Key wins over Authorization, which wins over `x-api-key` (the raw key, as
 * Anthropic's SDK sends it; accepted on every route).
 */
export function presentedToken(headers: Headers): string {
  for (const [header, name] of [
    ['x-hub-key', 'X-Hub-Key'],
    ['authorization', 'Authorization'],
  ] as const) {
    const value = headers[header];
    if (value === undefined) continue;
    const text = Array.isArray(value) ? value[0] : value;
    const match = BEARER.exec(text.trim());
    if (!match) throw unauthorized('malformed_api_key', `Malformed ${name} header: expected "Bearer <key>"`);
    return match[1];
  }
  const value = headers['x-api-key'];
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (text) return text;
  throw unauthorized(
    'missing_api_key',
    'Missing credential: send "X-Hub-Key: Bearer <key>", "Authorization: Bearer <key>" or "x-api-key: <key>" with the master key or a virtual key',
  );
}

/** Whether a virtual key can be used now; the same rule refuses it (`authenticate`) and reports it (`status`). */
export function keyStatus(key: KeyRecord, now = Date.now()): 'active' | 'inactive' | 'expired' {
  if (!key.is_active) return 'inactive';
  if (key.expires_at !== null && key.expires_at <= now) return 'expired';
  return 'active';
}

/** Resolves credentials to a principal; every refusal is a 401 with its own code and message. */
export class Authenticator {
  readonly #masterDigest: Buffer;
  readonly #store: GatewayStore;

  constructor(masterKey: string, store: GatewayStore) {
    this.#masterDigest = secretDigest(masterKey);
    this.#store = store;
  }

  async authenticate(headers: Headers, options: { now?: number } = {}): Promise<Principal> {
    const token = presentedToken(headers);
    // One digest serves both: the constant-time comparison with the master key and the stored hash (hashSecret).
    const digest = secretDigest(token);
    if (sameDigest(digest, this.#masterDigest)) return { kind: 'master' };
    const found = token.startsWith(VIRTUAL_KEY_PREFIX) ? await this.#store.keys.byHash(digest.toString('hex')) : null;
    if (!found) throw unauthorized('invalid_api_key', 'Invalid API key: it is neither the master key nor a virtual key of this gateway');
    const { key, ownerBudgetId, ownerAllowedModels } = found;
    const status = keyStatus(key, options.now);
    if (status === 'inactive') {
      throw unauthorized('key_inactive', `Virtual key ${key.id} is inactive (is_active is false); the master key holder can reactivate it`);
    }
    if (status === 'expired') throw unauthorized('key_expired', `Virtual key ${key.id} expired at ${isoTime(key.expires_at!)} (UTC)`);
    return { kind: 'virtual', key, ownerBudgetId, ownerAllowedModels };
  }
}
