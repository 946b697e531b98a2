import { evaluateBundleAsset } from './bundle-script.ts';

/**
 * Parts of the program that only some commands run, bundled apart from the main script and carried as SEA assets:
 * the gateway (with every vendor SDK) and the tool server are half of the JavaScript, and every function of a
 * scope-hoisted bundle is created when the script starts, whether its module is ever imported or not; serve's
 * metrics library is small, but every start of every model executable would compile it. They import
 * nothing of the rest of the program but src/shared/close-http.ts, so no class exists twice across bundles.
 * scripts/build-runtime.ts bundles each entry and points the main script's dynamic `import()` of it here; from
 * source the `import()` loads the module as usual.
 */
export const SPLIT_BUNDLES = {
  gateway: 'src/gateway/index.ts',
  tools: 'src/tools/index.ts',
  // prom-client, for serve's /metrics: loaded after the server listens, so kept out of the script every start compiles
  metrics: 'src/serve/metrics/prometheus/index.ts',
  // the OpenTelemetry SDK and its OTLP exporter, for serve --enable-otel only
  tracing: 'src/serve/tracing/index.ts',
} as const;

export type SplitBundleName = keyof typeof SPLIT_BUNDLES;

export const splitBundleAsset = (name: SplitBundleName): string => `split/${name}.cjs`;

/** Evaluates a split bundle from its SEA asset as a CommonJS module and returns its exports. */
export function loadSplitBundle(name: SplitBundleName): unknown {
  return evaluateBundleAsset(splitBundleAsset(name)).exports;
}
