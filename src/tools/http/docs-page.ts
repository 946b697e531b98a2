import { createHash } from 'node:crypto';

/**
 * GET /docs: Swagger UI (swagger-ui-dist) rendering /openapi.json. Its two files are served by this server — no CDN,
 * the tool server may run offline — and come from whoever runs the program: from source, the installed package;
 * in the single executable, SEA assets (scripts/build-runtime.ts ships them, runtime/main.ts reads them).
 */

/** Reads one of SWAGGER_UI_FILES. */
export type SwaggerUiFiles = (file: SwaggerUiFile) => Uint8Array;

export const SWAGGER_UI_FILES = ['swagger-ui-bundle.js', 'swagger-ui.css'] as const;
export type SwaggerUiFile = (typeof SWAGGER_UI_FILES)[number];

export const SWAGGER_UI_TYPES: Record<SwaggerUiFile, string> = {
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui.css': 'text/css; charset=utf-8',
};

export function isSwaggerUiFile(file: string): file is SwaggerUiFile {
  return (SWAGGER_UI_FILES as readonly string[]).includes(file);
}

/** The page's one inline script; the Content-Security-Policy allows it by its hash and no other. */
const INIT_SCRIPT = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true });`;

/**
 * Headers of GET /docs: scripts, styles and requests only from this server (Swagger UI styles its elements inline
 * and draws icons as data: images), and no framing by another page (frame-ancestors, and X-Frame-Options for
 * browsers without CSP 2) — a page on another port could otherwise frame "Try it out" and trick a click.
 */
export const DOCS_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': [
    "default-src 'none'",
    `script-src 'self' 'sha256-${createHash('sha256').update(INIT_SCRIPT).digest('base64')}'`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; '),
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

export const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tool server API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>${INIT_SCRIPT}</script>
</body>
</html>
`;
