/**
 * The management API as the page calls it: every call is an ordinary request with the master key in X-Hub-Key, so the
 * dashboard can do nothing the API would not let the key holder do. The key lives in this tab's session storage
 * only (gone when the tab closes); it is the only secret the page keeps.
 */
const KEY_STORAGE = 'gateway-dashboard.master-key';

/** A refusal or failure of the API, as its OpenAI-style error body describes it. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string | null;
  readonly requestId: string | null;
  /** The field a 400 is about (`targets.0.model`, `api_base`, …), when the API names one. */
  readonly param: string | null;

  constructor(status: number, message: string, code: string | null, requestId: string | null, param: string | null = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.param = param;
  }
}

/** Thrown to stop a page's work once the API refused the key: the page has already gone back to sign-in. */
export class SessionEnded extends Error {}

export const storedKey = (): string | null => sessionStorage.getItem(KEY_STORAGE);
export const storeKey = (key: string): void => sessionStorage.setItem(KEY_STORAGE, key);
export const forgetKey = (): void => sessionStorage.removeItem(KEY_STORAGE);

type Query = Record<string, string | number | undefined | null>;

export function withQuery(path: string, query: Query = {}): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== null && value !== '') params.set(name, String(value));
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/**
 * The path of one record, `/v1/users/<id>` and below: every id is one encoded path segment, so an id holding `/`, `?`,
 * `#` or `%` names that record and nothing else. ("." and ".." stay as they are: see `dotSegment`.)
 */
export function recordPath(collection: 'users' | 'keys' | 'budgets' | 'pricing' | 'providers' | 'routes', id: string, ...rest: string[]): string {
  return [`/v1/${collection}`, id, ...rest].map((segment, i) => (i === 0 ? segment : encodeURIComponent(segment))).join('/');
}

/**
 * A path segment a browser resolves as a directory step before the request leaves, whatever its encoding (`..`, `.%2E`,
 * `%2e%2e`): `/v1/users/..` would reach `/v1/`. The API refuses such ids at creation; one stored before that cannot be
 * addressed from a page, so the call is refused here instead of being sent elsewhere.
 */
const dotSegment = (path: string) => path.split(/[?#]/)[0].split('/').some((segment) => /^(\.|%2e){1,2}$/i.test(segment));

async function errorOf(response: Response): Promise<ApiError> {
  const requestId = response.headers.get('x-request-id');
  const text = await response.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown; code?: unknown; param?: unknown } };
    if (body.error && typeof body.error.message === 'string') {
      const { message, code, param } = body.error;
      return new ApiError(response.status, message, typeof code === 'string' ? code : null, requestId, typeof param === 'string' ? param : null);
    }
  } catch {
    // not JSON: a proxy's error page, say
  }
  return new ApiError(response.status, text.slice(0, 300) || response.statusText || 'no message', null, requestId);
}

export class Api {
  private readonly key: string;
  private readonly onSessionEnded: (error: ApiError) => void;

  /** `onSessionEnded` runs when the API answers 401 to the stored key (changed, or the gateway restarted with another). */
  constructor(key: string, onSessionEnded: (error: ApiError) => void) {
    this.key = key;
    this.onSessionEnded = onSessionEnded;
  }

  /** One call; a JSON answer, or ApiError (network failures are status 0). */
  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await this.send(method, path, body);
    return (await response.json()) as T;
  }

  /** One call whose answer is a file (the usage CSV). */
  async download(path: string): Promise<Blob> {
    return (await this.send('GET', path)).blob();
  }

  private async send(method: string, path: string, body?: unknown): Promise<Response> {
    if (dotSegment(path)) {
      throw new ApiError(0, `${path} cannot be sent: a browser reads "." and ".." in an address as directory steps (use curl --path-as-is for such an id)`, 'unaddressable_path', null);
    }
    const headers: Record<string, string> = { 'x-hub-key': `Bearer ${this.key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store', credentials: 'omit' });
    } catch (error) {
      throw new ApiError(0, `The gateway could not be reached (${(error as Error).message})`, 'network_error', null);
    }
    if (response.ok) return response;
    const error = await errorOf(response);
    if (response.status === 401) {
      this.onSessionEnded(error);
      throw new SessionEnded(error.message);
    }
    throw error;
  }
}

/** Checks a key before it is kept: the cheapest management call. Resolves, or rejects with ApiError. */
export async function checkMasterKey(key: string): Promise<void> {
  let ended: ApiError | null = null;
  const api = new Api(key, (error) => (ended = error));
  try {
    await api.call('GET', '/v1/budgets');
  } catch (error) {
    throw ended ?? error;
  }
}

// The API's records, as far as the page reads them.

export interface List<T> {
  object: 'list';
  data: T[];
}

export interface User {
  user_id: string;
  alias: string;
  budget_id: string | null;
  allowed_models: string[] | null;
  created_at: string;
}

export interface VirtualKey {
  id: string;
  key_name: string;
  key_prefix: string;
  user_id: string | null;
  budget_id: string | null;
  created_at: string;
  expires_at: string | null;
  is_active: boolean;
  status: 'active' | 'inactive' | 'expired';
  allowed_models: string[] | null;
  allow_user_override: boolean;
}

export interface CreatedKey extends VirtualKey {
  key: string;
  previous_key_expires_at?: string | null;
}

export interface Budget {
  budget_id: string;
  name: string | null;
  max_budget: number;
  soft_budget: number | null;
  soft_budget_exceeded: boolean;
  spend: number;
  reserved: number;
  remaining: number;
  reset_every_seconds: number | null;
  reset_alignment: 'daily' | 'weekly' | 'monthly' | null;
  reset_time_zone: string | null;
  next_reset_at: string | null;
}

export interface Totals {
  requests: number;
  /** Calls that did not succeed, refusals included. */
  errors: number;
  /** Calls refused before any provider (budget, allowed models, rate limit, …). */
  refused: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost: number;
}

export interface UsageSummary {
  since: string;
  until: string;
  totals: Totals;
  /** `model` is provider:model, as the usage table shows it and the model filter takes it. */
  by_model: (Totals & { model: string })[];
  by_user: (Totals & { user_id: string | null })[];
  by_key: (Totals & { key_id: string | null })[];
}

export interface UsageSeries {
  interval: 'hour' | 'day';
  data: (Totals & { start: string })[];
}

export interface UsageRow {
  id: string;
  request_id: string;
  created_at: string;
  user_id: string | null;
  key_id: string | null;
  endpoint: string;
  provider: string;
  model: string;
  /** The model route the client called; null for a provider:model call. */
  route: string | null;
  /** Targets tried: more than 1 when a route fell back. */
  attempts: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost: number;
  status: string;
  status_code: number | null;
  duration_ms: number | null;
  /** Why the call was refused, failed or interrupted (an error code). */
  reason: string | null;
}

export interface UsagePage extends List<UsageRow> {
  has_more: boolean;
  next_cursor: string | null;
}

/**
 * A call in flight (GET /v1/usage/in-flight): its pending usage row and how long it has run. Its cost is what it is
 * charged if its gateway dies now: its hold, or what its stream has delivered.
 */
export interface InFlightCall extends Pick<UsageRow, 'id' | 'request_id' | 'created_at' | 'user_id' | 'key_id' | 'endpoint' | 'provider' | 'model' | 'route' | 'cost'> {
  age_ms: number;
  instance_id: string | null;
}

export interface InFlightList extends List<InFlightCall> {
  has_more: boolean;
}

/** Where an entry of the runtime configuration was written last: the configuration file or the API. */
export type ConfigSource = 'config' | 'api';

export interface Pricing {
  model: string;
  input_cost_per_million: number;
  output_cost_per_million: number;
  search_unit_cost_per_thousand: number;
  /** config: from the configuration file; api: set through PUT /v1/pricing; bundled: the table shipped with the gateway. */
  source: ConfigSource | 'bundled';
  updated_at: string | null;
}

/** A provider (GET /v1/providers); its key is write-only, shown as set or not. */
export interface Provider {
  name: string;
  api_base: string | null;
  api_key_set: boolean;
  source: ConfigSource;
  updated_at: string;
}

/** A target of a model route, as GET /v1/routes gives it and PUT takes it back. */
export interface RouteTarget {
  model: string;
  priority?: number;
  weight?: number;
  api_base?: string;
  api_key_set: boolean;
  timeout_seconds?: number;
}

export interface ModelRoute {
  name: string;
  targets: RouteTarget[];
  timeout_seconds: number | null;
  source: ConfigSource;
  updated_at: string;
}

/** An entry of GET /v1/models; `targets` is what a model route would add (see pages/models.ts). */
export interface Model {
  id: string;
  owned_by?: string;
  targets?: unknown;
}
