import type { FastifyRequest } from 'fastify';
import type { Authenticator, Principal } from '../auth.ts';
import type { CallLedger } from '../ledger.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { GatewayStore } from '../storage/index.ts';
import type { Upstream } from '../upstream.ts';

/** What the HTTP routes work with. */
export interface GatewayContext {
  store: GatewayStore;
  ledger: CallLedger;
  upstream: Upstream;
  metrics: GatewayMetrics;
  authenticator: Authenticator;
  authenticate(request: FastifyRequest, options?: { allowXApiKey?: boolean }): Promise<Principal>;
}
