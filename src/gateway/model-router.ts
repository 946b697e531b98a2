import { invalidRequest, type GatewayError } from './errors.ts';
import type { RouteDefinition } from './storage/index.ts';
import type { ProviderSettings } from './upstream.ts';
import { upstreamErrorOf } from './upstream.ts';

/** One provider model a call can be sent to. */
export interface CallTarget {
  provider: string;
  model: string;
  /**
   * The upstream connection to call it through: the provider's own (named like the provider), or one made for a
   * route target with its own key, address or timeout.
   */
  connection: string;
}

/** Where one call goes: the targets in the order they are tried (one for a plain `provider:model`). */
export interface CallPlan {
  /** The public model name the client called, or null for a `provider:model`. */
  route: string | null;
  targets: CallTarget[];
}

/** A provider client configuration other than a configured provider's own (see ModelRouter.connections). */
export interface Connection extends ProviderSettings {
  provider: string;
  timeoutMs?: number;
}

/** Where the fallback loop reports which target is being tried (the call's ledger ticket). */
export interface AttemptState {
  target: { provider: string; model: string };
  attempts: number;
}

/** Targets of one priority: the first of a call is chosen by smooth weighted round robin, the others follow in list order. */
interface PriorityGroup {
  targets: CallTarget[];
  weights: number[];
  current: number[];
  total: number;
}

/**
 * `provider:model` or `provider/model` → its parts; the model part may itself contain ':' or '/'. The separator is
 * the first ':' when the text before it is a configured provider (so `openrouter:meta-llama/llama-3` is openrouter's
 * `meta-llama/llama-3`), else the first '/' when the text before that is one (`openai/gpt-4o:free` is openai's
 * `gpt-4o:free`); `meta-llama/llama-3` alone, with no provider `meta-llama`, is refused like any unknown provider.
 */
export function splitModel(value: unknown, providers: readonly string[]): { provider: string; model: string } {
  if (typeof value !== 'string' || value === '') throw invalidRequest('"model" is required: a string of the form provider:model, e.g. openai:gpt-4o-mini', 'model');
  if (value.includes('\u0000')) throw invalidRequest('"model" must not contain NUL characters', 'model');
  const colon = value.indexOf(':');
  const slash = value.indexOf('/');
  const colonProvider = colon > 0 ? value.slice(0, colon) : null;
  const slashProvider = slash > 0 ? value.slice(0, slash) : null;
  const separator =
    colonProvider !== null && providers.includes(colonProvider) ? colon : slashProvider !== null && providers.includes(slashProvider) ? slash : colon > 0 ? colon : slash;
  if (separator <= 0 || separator === value.length - 1) {
    throw invalidRequest(`"model" must be provider:model or provider/model (e.g. openai:gpt-4o-mini) or a configured model name, got "${value}"`, 'model');
  }
  const provider = value.slice(0, separator);
  if (!providers.includes(provider)) {
    throw invalidRequest(`Provider "${provider}" is not configured on this gateway (configured: ${providers.join(', ') || 'none'})`, 'model', 'unknown_provider');
  }
  return { provider, model: value.slice(separator + 1) };
}

/**
 * The gateway's `models:` section: public model names, each an ordered list of targets. A call to a public name
 * gets a plan (`plan`) whose targets are tried in turn by `callWithFallback`; any other name must be a
 * `provider:model` of a configured provider. A name that is both resolves to the route.
 */
export class ModelRouter {
  #routes = new Map<string, PriorityGroup[]>();
  #providers: readonly string[] = [];
  /**
   * The connections route targets need besides the configured providers, by connection name. Kept across `load`: a
   * call planned just before a change still finds the connection it was planned with.
   */
  readonly connections: Record<string, Connection> = {};

  constructor(routes: Record<string, RouteDefinition>, providers: Record<string, ProviderSettings>) {
    this.load(routes, providers);
  }

  /** Replaces the routes and providers (a change of the runtime configuration); calls planned already are unaffected. */
  load(routes: Record<string, RouteDefinition>, providers: Record<string, ProviderSettings>): void {
    this.#providers = Object.keys(providers);
    const loaded = new Map<string, PriorityGroup[]>();
    for (const [name, route] of Object.entries(routes)) {
      const byPriority = new Map<number, PriorityGroup>();
      route.targets.forEach((config, i) => {
        const colon = config.model.indexOf(':');
        const provider = config.model.slice(0, colon);
        const timeoutSeconds = config.timeout_seconds ?? route.timeout_seconds;
        const ownSettings = config.api_key !== undefined || config.api_base !== undefined;
        let connection = provider;
        if (ownSettings || timeoutSeconds !== undefined) {
          // Not a name a client can call: splitModel accepts only configured providers.
          connection = `${provider}@${name}#${i}`;
          // A target with its own key or address takes nothing from the provider's settings: the provider's key
          // must not go to an address configured for another account.
          const settings = ownSettings ? { api_key: config.api_key, api_base: config.api_base } : (providers[provider] ?? {});
          this.connections[connection] = { provider, ...settings, ...(timeoutSeconds !== undefined ? { timeoutMs: timeoutSeconds * 1000 } : {}) };
        }
        // Without priorities the list order is the order of trial: each target is a priority of its own.
        const priority = config.priority ?? i;
        const group = byPriority.get(priority) ?? { targets: [], weights: [], current: [], total: 0 };
        const weight = config.weight ?? 1;
        group.targets.push({ provider, model: config.model.slice(colon + 1), connection });
        group.weights.push(weight);
        group.current.push(0);
        group.total += weight;
        byPriority.set(priority, group);
      });
      loaded.set(
        name,
        [...byPriority.entries()].sort(([a], [b]) => a - b).map(([, group]) => group),
      );
    }
    this.#routes = loaded;
  }

  /** The public model names, in configuration order. */
  get names(): string[] {
    return [...this.#routes.keys()];
  }

  /** A route's targets as configured, by priority group (what an operator sees in /v1/models); undefined: no route. */
  targetsOf(name: string): { model: string; priority: number; weight: number }[] | undefined {
    return this.#routes.get(name)?.flatMap((group, priority) =>
      group.targets.map((target, i) => ({ model: `${target.provider}:${target.model}`, priority, weight: group.weights[i] })),
    );
  }

  /** The plan of one call to `model` (the request's field): a route's targets in trial order, or the provider:model. */
  plan(model: unknown): CallPlan {
    const groups = typeof model === 'string' ? this.#routes.get(model) : undefined;
    if (!groups) {
      const { provider, model: name } = splitModel(model, this.#providers);
      return { route: null, targets: [{ provider, model: name, connection: provider }] };
    }
    const targets: CallTarget[] = [];
    for (const group of groups) {
      if (group.targets.length === 1) {
        targets.push(group.targets[0]);
        continue;
      }
      const first = pickWeighted(group);
      targets.push(group.targets[first], ...group.targets.filter((_, i) => i !== first));
    }
    return { route: model as string, targets };
  }
}

/**
 * Smooth weighted round robin (as nginx balances upstreams): every target gains its weight, the one with the most
 * goes and gives back the total. Over any run of `total` picks each target is chosen exactly `weight` times, spread
 * out rather than in blocks, with no randomness (a test can count the split).
 */
function pickWeighted(group: PriorityGroup): number {
  let best = 0;
  for (let i = 0; i < group.targets.length; i++) {
    group.current[i] += group.weights[i];
    if (group.current[i] > group.current[best]) best = i;
  }
  group.current[best] -= group.total;
  return best;
}

/**
 * Whether another target may answer instead: the provider was busy (429), failed (5xx), could not be reached or did
 * not answer in time. Not when the request itself is at fault (400, 404, a content filter), nor when the gateway's
 * credentials were refused (401/403: the next target's answer would hide a configuration error), nor when the client
 * went away.
 */
export function fallsBack(failure: GatewayError): boolean {
  if (failure.status === 429 || failure.status === 504) return true;
  if (failure.status !== 502 || failure.code === 'upstream_authentication_failed') return false;
  const cause = (failure.cause as object | null | undefined)?.constructor?.name ?? '';
  return !cause.startsWith('ContentFilter');
}

/**
 * Runs `attempt` on the plan's targets in turn until one answers or a failure that must not fall back (see
 * `fallsBack`); the last failure is thrown as a GatewayError. `state` always names the target being tried and the
 * number of attempts so far, so the usage row records the one that answered (or failed last).
 */
export async function callWithFallback<T>(
  plan: CallPlan,
  state: AttemptState,
  signal: AbortSignal,
  attempt: (target: CallTarget) => Promise<T>,
  onFallback?: (failure: GatewayError, target: CallTarget) => void,
): Promise<T> {
  for (let i = 0; ; i++) {
    const target = plan.targets[i];
    state.target = target;
    state.attempts = i + 1;
    try {
      return await attempt(target);
    } catch (error) {
      const failure = upstreamErrorOf(error, target.provider);
      if (i === plan.targets.length - 1 || signal.aborted || !fallsBack(failure)) throw failure;
      onFallback?.(failure, target);
    }
  }
}
