import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { DASHBOARD_FILES, DASHBOARD_TYPES, type DashboardFile, type DashboardFiles } from '../dashboard/files.ts';

/**
 * Only this server's own script and stylesheet run; the page talks only to this server (the management API, with the
 * master key the user typed); no frames, forms posting elsewhere, plugins or inline code.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': DASHBOARD_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

/**
 * GET /dashboard/: the static dashboard, no credential (it holds no data: every value it shows comes from an
 * authenticated management API call the page makes). Revalidated on every load (ETag), so an upgrade shows at once.
 */
export function registerDashboardRoutes(app: FastifyInstance, files: DashboardFiles): void {
  const served = new Map(
    DASHBOARD_FILES.map((file) => [file, { body: Buffer.from(files[file]), etag: `"${createHash('sha256').update(files[file]).digest('base64url').slice(0, 27)}"` }]),
  );

  const open = { config: { credential: 'none' } } as const;
  const send = (file: DashboardFile) => {
    const { body, etag } = served.get(file)!;
    return app.get(file === 'index.html' ? '/dashboard/' : `/dashboard/${file}`, open, async (request, reply) => {
      reply.headers({ ...SECURITY_HEADERS, 'cache-control': 'no-cache', etag });
      if (request.headers['if-none-match'] === etag) return reply.code(304).send();
      return reply.type(DASHBOARD_TYPES[file]).send(body);
    });
  };
  for (const file of DASHBOARD_FILES) send(file);
  app.get('/dashboard', open, async (_request, reply) => reply.redirect('/dashboard/', 308));
}
