import type { FastifyInstance } from 'fastify';
import { closeHttp } from '../shared/close-http.ts';
import type { ThreadScript } from '../shared/thread-script.ts';
import { Authenticator } from './auth.ts';
import { checkMasterKey, type GatewayConfig } from './config.ts';
import type { DashboardFiles } from './dashboard/files.ts';
import { createGatewayApp } from './http/app.ts';
import type { GatewayContext } from './http/context.ts';
import { CallLedger } from './ledger.ts';
import { GatewayMetrics } from './metrics.ts';
import { ModelRouter } from './model-router.ts';
import { PricingPolicy } from './pricing-policy.ts';
import { LocalRateLimiter, SharedRateLimiter } from './rate-limit.ts';
import { openStore, type GatewayStore } from './storage/index.ts';
import { HubUpstream } from './hub-upstream.ts';
import { RuntimeConfig } from './runtime-config.ts';
import { seedRuntimeConfig } from './seed-config.ts';
import type { Upstream } from './upstream.ts';
import { UsageRecorder } from './usage-recorder.ts';

export interface RunningGateway {
  app: FastifyInstance;
  store: GatewayStore;
  /** http://host:port of the listening server. */
  url: string;
  /** Stops accepting requests, finishes those in flight, writes the last usage rows, closes the database. */
  close(): Promise<void>;
}

export interface GatewayOptions {
  version: string;
  logger?: boolean | { level: string; stream?: NodeJS.WritableStream };
  /** Replaces the provider calls (tests). */
  upstream?: Upstream;
  /** Listen (default) or only build the app (inject-based tests). */
  listen?: boolean;
  /** The dashboard's files (src/gateway/dashboard/files.ts), served at /dashboard/; absent: no dashboard. */
  dashboard?: DashboardFiles;
  /**
   * How long `close` goes on accepting requests after /health/readiness turned 503 (default 0): the time a load
   * balancer or Kubernetes needs to stop sending new ones.
   */
  shutdownDelayMs?: number;
  /** How long `close` lets requests in flight finish before cutting their connections (default 30 s). */
  closeGraceMs?: number;
  /** The SQLite reader thread's program (storage/sqlite-reader.ts): usage analytics off the event loop. */
  sqliteReader?: ThreadScript;
}

/** Opens the database, applies migrations, and serves the gateway. */
export async function startGateway(config: GatewayConfig, options: GatewayOptions): Promise<RunningGateway> {
  checkMasterKey(config.masterKey);
  const store = openStore(config.databaseUrl, { sqliteReader: options.sqliteReader });
  let interrupted = 0;
  let seeded = 0;
  try {
    await store.migrate();
    // With SQLite this process is the only gateway on the file: the pending calls of a killed process are settled as
    // interrupted and its holds cleared. With PostgreSQL, instances that stopped heartbeating get the same (see
    // GatewayStore) when they are reaped.
    if (store.dialect === 'sqlite') interrupted = await store.usage.settleInterrupted();
    else {
      await store.instances.heartbeat();
      await store.instances.reapDead(Date.now() - config.instanceLeaseSeconds * 1000);
    }
    seeded = await seedRuntimeConfig(store, config);
  } catch (error) {
    await store.close();
    throw error;
  }
  const metrics = new GatewayMetrics();
  const recorder = new UsageRecorder(store);
  recorder.onBatch = (rows) => metrics.usageBatchRows.observe(rows);
  const limits = config.rateLimits;
  // PostgreSQL may have several instances: they share one count; SQLite has one process, which counts alone
  const rateLimiter = !limits
    ? null
    : store.dialect === 'postgres'
      ? new SharedRateLimiter(limits, store, metrics, (error) => app.log.error({ err: error }, 'rate limit window update failed'))
      : new LocalRateLimiter(limits, metrics);
  const pricing = new PricingPolicy({ requirePricing: config.requirePricing, bundledPricing: config.bundledPricing });
  const ledger = new CallLedger({ store, recorder, metrics, reserveOutputTokens: config.reserveOutputTokens, rateLimiter, pricingPolicy: pricing });
  const authenticator = new Authenticator(config.masterKey, store);
  // Providers and routes come from the database (seeded from the file above), loaded by runtimeConfig.refresh below.
  const router = new ModelRouter({}, {});
  const upstream = options.upstream ?? new HubUpstream({}, { timeoutMs: config.upstreamTimeoutSeconds * 1000, connections: router.connections });
  const runtimeConfig = new RuntimeConfig({ store, router, upstream, ledger });
  try {
    await runtimeConfig.refresh();
  } catch (error) {
    await store.close();
    throw error;
  }
  const context: GatewayContext = {
    store,
    ledger,
    upstream,
    router,
    metrics,
    pricing,
    authenticator,
    runtimeConfig,
  };
  const lifecycle = { shuttingDown: false };
  const app = await createGatewayApp(context, {
    version: options.version,
    logger: options.logger,
    frontDoor: config.frontDoor,
    dashboard: options.dashboard,
    corsAllowOrigins: config.corsAllowOrigins,
    lifecycle,
  });
  ledger.onWriteError = (error, row) =>
    row
      ? app.log.error(
          { err: error, reqId: row.request_id, usage: { ...row } },
          row.status === 'pending' ? 'usage row could not be written; the call was refused before reaching the provider' : 'usage row could not be written; the call was answered',
        )
      : app.log.error({ err: error }, 'could not record what streams have delivered so far');
  if (seeded > 0) app.log.info({ entries: seeded }, 'wrote the providers, prices and model routes the configuration file added or changed into the database');
  runtimeConfig.onPollError = (error) => app.log.error({ err: error }, 'could not check the database for configuration changes; serving with the configuration loaded last');
  runtimeConfig.onPollRecovered = () => app.log.info('checking the database for configuration changes again');
  runtimeConfig.start();
  if (interrupted > 0) app.log.warn({ interrupted }, 'settled the calls a previous gateway process left pending (status interrupted, charged at their holds)');
  let url = '';
  if (options.listen !== false) {
    try {
      url = await app.listen({ host: config.host, port: config.port });
    } catch (error) {
      runtimeConfig.stop();
      await app.close();
      await store.close();
      throw error;
    }
  }
  const lease = config.instanceLeaseSeconds * 1000;
  const heartbeat =
    store.dialect === 'postgres'
      ? setInterval(() => {
          const now = Date.now();
          store.instances
            .heartbeat(now)
            .then((rejoined) => {
              if (rejoined) {
                app.log.warn(
                  { instance: store.instanceId },
                  'this instance had been taken for dead (no heartbeat for longer than the lease) and its budget holds given back; registered again',
                );
              }
              return store.instances.reapDead(now - lease);
            })
            .then((reaped) => {
              if (reaped > 0) app.log.warn({ reaped }, 'gave back the budget holds of gateway instances that stopped heartbeating');
            })
            .catch((error: unknown) => app.log.error({ err: error }, 'instance heartbeat failed'));
        }, lease / 3).unref()
      : null;
  return {
    app,
    store,
    url,
    async close() {
      // readiness answers 503 from here; requests are still served for the shutdown delay, then in-flight ones finish
      lifecycle.shuttingDown = true;
      if (options.shutdownDelayMs) await new Promise((resolve) => setTimeout(resolve, options.shutdownDelayMs));
      if (heartbeat) clearInterval(heartbeat);
      runtimeConfig.stop();
      rateLimiter?.close();
      // Requests in flight may finish; a stream that does not end within the grace period is cut (its usage row is
      // still written, as for any client that goes away).
      await closeHttp(app, { graceMs: options.closeGraceMs ?? 30_000 });
      // Cut streams report their rows a moment after their connection closed.
      await ledger.whenIdle(5_000);
      await recorder.drain();
      await store.instances.leave().catch((error: unknown) => app.log.error({ err: error }, 'could not leave the instance table'));
      await store.close();
    },
  };
}
