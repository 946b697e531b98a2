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
<script>
window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true });
</script>
</body>
</html>
`;
