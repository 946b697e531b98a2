import type { Authenticator } from '../auth.ts';
import type { CallLedger } from '../ledger.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { ModelRouter } from '../model-router.ts';
import type { PricingPolicy } from '../pricing-policy.ts';
import type { RuntimeConfig } from '../runtime-config.ts';
import type { GatewayStore } from '../storage/index.ts';
import type { Upstream } from '../upstream.ts';

/** What the HTTP routes work with. */
export interface GatewayContext {
  store: GatewayStore;
  ledger: CallLedger;
  upstream: Upstream;
  /** Model routes (`models:`) and the provider:model names: where a call's `model` goes. */
  router: ModelRouter;
  metrics: GatewayMetrics;
  /** Which models need a price, and the bundled prices below the gateway's own. */
  pricing: PricingPolicy;
  /** Used by the front door (front-door.ts) before a body is read; routes read `principalOf(request)`. */
  authenticator: Authenticator;
  /** Providers, model routes and prices editable at run time, shared through the database. */
  runtimeConfig: RuntimeConfig;
}
