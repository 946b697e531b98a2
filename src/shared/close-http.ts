import type { FastifyInstance } from 'fastify';

/**
 * Stops a fastify server accepting and lets the requests in flight finish. fastify's close() closes the keep-alive
 * connections idle at that moment; a connection whose request is still running becomes idle only after its response,
 * and would then stay open until its keep-alive timeout (72 s in fastify), holding the close. So idle connections are
 * closed as they appear. With `graceMs`, connections still busy after that long are cut.
 */
export async function closeHttp(app: FastifyInstance, options: { graceMs?: number } = {}): Promise<void> {
  const sweeper = setInterval(() => app.server.closeIdleConnections(), 25);
  const force = options.graceMs === undefined ? undefined : setTimeout(() => app.server.closeAllConnections(), options.graceMs);
  try {
    await app.close();
  } finally {
    clearInterval(sweeper);
    clearTimeout(force);
  }
}
