/**
 * npm run build:runtime [-- --target <triple>] — makes the Node SEA base binary `encoder` of each target:
 *
 *   1. esbuild bundles runtime/main.ts, the program (onnxruntime-node's computed require of its .node file is pointed
 *      at runtime/onnxruntime-binding.ts, which dlopens the extracted SEA asset), and runtime/sea-entry.ts, the SEA's
 *      main script, which evaluates the program;
 *   2. the target's Node binary comes from the npm registry at the pinned version (platforms/<triple>/platform.json);
 *   3. the SEA blob is made by the pinned Node itself (a blob only runs in the Node version that made it) with the
 *      program, the target's onnxruntime binding and library and wasmoon's wasm as assets;
 *   4. the Node binary is stripped, and postject injects the blob;
 *   5. the host's own target only: the executable runs `infer` and `serve` of a tiny model once each, each run
 *      writing V8's code cache of the program as it left it, and steps 3 and 4 are done again with the caches as more
 *      assets (runtime/sea-entry.ts says why).
 *
 * Output: dist/runtime/<triple>/encoder. macOS targets need their signature removed before injection and an
 * ad-hoc signature after, which only macOS's codesign does: they are built on a Mac (docs/building-runtimes.md).
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import * as esbuild from 'esbuild';
import { TARGETS, executableExtension, hostTarget, parseTarget, platformOf, type PlatformEntry, type Target } from '../src/builder/targets.ts';
import type { CodecFiles } from '../src/encoder/image-codecs.ts';
import { WASM_CODEC_FILES, type WasmCodec } from '../src/encoder/image/wasm-codecs.ts';
import { INFERENCE_WORKER_ASSET, NATIVE_MANIFEST_ASSET, PROTO_ASSET, SQLITE_READER_ASSET, swaggerUiAsset, type NativeManifest } from '../runtime/native-assets.ts';
import { SPLIT_BUNDLES, splitBundleAsset, type SplitBundleName } from '../runtime/split-bundles.ts';
import { CODE_CACHE_RUNS, PROGRAM_ASSET, programCodeCacheAsset, WRITE_CODE_CACHE_ENV, type CodeCacheRun } from '../runtime/program-assets.ts';
import { PRESETS, writeModelDirectory } from './model-generator/index.ts';
import { requestValidatorsCode } from './request-validators-code.ts';
import { SWAGGER_UI_FILES } from '../src/tools/http/docs-page.ts';
import { bundleDashboard } from '../src/gateway/dashboard/bundle.ts';
import { DASHBOARD_FILES, dashboardAsset } from '../src/gateway/dashboard/files.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = (await import('node:module')).createRequire(import.meta.url);
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/** The Node version every base binary embeds: the pinned devDependency, which also runs this script. */
export function pinnedNodeVersion(): string {
  const packageJson = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
  return packageJson.devDependencies.node as string;
}

/** The inference worker's bundle, written beside the runtime's (a SEA asset that a worker thread evaluates). */
export function workerBundleOf(bundle: string): string {
  return path.join(path.dirname(bundle), INFERENCE_WORKER_ASSET);
}

/** The gateway's SQLite reader thread's bundle, written beside the runtime's (a SEA asset, like the inference worker). */
export function sqliteReaderBundleOf(bundle: string): string {
  return path.join(path.dirname(bundle), SQLITE_READER_ASSET);
}

/** The SEA's main script (runtime/sea-entry.ts), bundled beside the program's. */
export function entryBundleOf(bundle: string): string {
  return path.join(path.dirname(bundle), 'sea-entry.cjs');
}

/** Where the split bundle `name` is written beside the main bundle (runtime/split-bundles.ts). */
export function splitBundleOf(bundle: string, name: SplitBundleName): string {
  return path.join(path.dirname(bundle), splitBundleAsset(name));
}

/** Where the gateway dashboard's file `file` is written beside the main bundle. */
export function dashboardFileOf(bundle: string, file: string): string {
  return path.join(path.dirname(bundle), 'dashboard', file);
}

/**
 * Bundles the runtime, its inference worker, the gateway's SQLite reader, its split bundles and the gateway dashboard
 * once; every target's blob uses the same JavaScript.
 */
export async function bundleRuntime(outFile: string): Promise<void> {
  await Promise.all([
    bundle(path.join(root, 'runtime', 'main.ts'), outFile, [splitBundlesFromAssets()]),
    bundle(path.join(root, 'runtime', 'sea-entry.ts'), entryBundleOf(outFile)),
    bundle(path.join(root, 'src', 'encoder', 'onnx-worker.ts'), workerBundleOf(outFile)),
    bundle(path.join(root, 'src', 'gateway', 'storage', 'sqlite-reader.ts'), sqliteReaderBundleOf(outFile)),
    ...Object.entries(SPLIT_BUNDLES).map(([name, entry]) => bundle(path.join(root, entry), splitBundleOf(outFile, name as SplitBundleName))),
    bundleDashboard().then((files) => {
      mkdirSync(path.dirname(dashboardFileOf(outFile, 'index.html')), { recursive: true });
      for (const file of DASHBOARD_FILES) writeFileSync(dashboardFileOf(outFile, file), files[file]);
    }),
  ]);
}

/**
 * The main script's dynamic `import()` of a split bundle's entry becomes a module that evaluates the bundle from
 * its SEA asset (runtime/split-bundles.ts), so the entry's code stays out of the main script.
 */
function splitBundlesFromAssets(): esbuild.Plugin {
  const names = new Map(Object.entries(SPLIT_BUNDLES).map(([name, entry]) => [path.join(root, entry), name]));
  const loader = path.join(root, 'runtime', 'split-bundles.ts');
  return {
    name: 'split-bundles-from-sea-assets',
    setup(build) {
      build.onResolve({ filter: /[\\/]index\.ts$/ }, (args) => {
        const name = names.get(path.resolve(args.resolveDir, args.path));
        if (name === undefined) return undefined;
        if (args.kind !== 'dynamic-import') {
          throw new Error(`${args.importer} imports ${args.path} statically: a split bundle (runtime/split-bundles.ts) is only loaded with import()`);
        }
        return { path: name, namespace: 'split-bundle' };
      });
      build.onLoad({ filter: /.*/, namespace: 'split-bundle' }, (args) => ({
        contents: `module.exports = require(${JSON.stringify(loader)}).loadSplitBundle(${JSON.stringify(args.path)});`,
        resolveDir: root,
        loader: 'js',
      }));
    },
  };
}

async function bundle(entry: string, outFile: string, plugins: esbuild.Plugin[] = []): Promise<void> {
  const bindingLoader = path.join(root, 'runtime', 'onnxruntime-binding.ts');
  const result = await esbuild.build({
    entryPoints: [entry],
    outfile: outFile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node26',
    minify: true,
    // For CPU profiles of the executable: a map beside each bundle in the work folder (docs/building-runtimes.md).
    sourcemap: process.env.ENCODER_BUILD_SOURCE_MAPS ? 'external' : false,
    // Minified class names would change what error.name and constructor.name say, and the gateway and Hub tell
    // failures apart by them (a provider timeout answered 502 instead of 504 from the executable; found by the soak).
    keepNames: true,
    legalComments: 'none',
    // import() of a built-in module (wasmoon: `await import('module')`) becomes require(): bundles are evaluated as
    // scripts (runtime/bundle-script.ts), which have no loader for import()
    supported: { 'dynamic-import': false },
    logLevel: 'warning',
    plugins: [
      ...plugins,
      {
        // the request validators as code generated now instead of compiled at the first request (request-validators.ts)
        name: 'precompiled-request-validators',
        setup(build) {
          build.onLoad({ filter: /[\\/]src[\\/]encoder[\\/]request-validators\.ts$/ }, () => ({ contents: requestValidatorsCode(), loader: 'js', resolveDir: root }));
        },
      },
      // onnxruntime-node requires its binding by a computed path, which a SEA cannot load: from the SEA assets instead
      rewriteDependency({
        name: 'onnxruntime-binding-from-sea-assets',
        file: /onnxruntime-node[\\/]dist[\\/]binding\.js$/,
        find: /require\(`\.\.\/bin\/napi-v6\/\$\{process\.platform\}\/\$\{process\.arch\}\/onnxruntime_binding\.node`\)/,
        replace: `require(${JSON.stringify(bindingLoader)}).loadOnnxruntimeBinding()`,
      }),
      // commander imports node:child_process at its top for executable subcommands, which this program has none of:
      // loading it (with net, dgram and their streams) cost every start ~4 ms. Loaded at a spawn instead.
      rewriteDependency({
        name: 'commander-child-process-on-use',
        file: /[\\/]commander[\\/]lib[\\/]command\.js$/,
        find: "import childProcess from 'node:child_process';",
        replace: "const childProcess = { spawn: (...args) => process.getBuiltinModule('node:child_process').spawn(...args) };",
      }),
    ],
  });
  // A warning here is a bundle that misbehaves at run time (an import that will always be undefined, …): stop.
  if (result.warnings.length > 0) throw new Error(`${path.relative(root, entry)}: esbuild warned (above); the bundle would not run as the sources do`);
  writeFileSync(outFile, asciiOnly(readFileSync(outFile, 'utf8')));
}

/**
 * A plugin that replaces `find` in a dependency's file by `replace` while bundling. When `find` is no longer there (the
 * dependency changed), the build stops rather than bundle the file unchanged.
 */
function rewriteDependency(rewrite: { name: string; file: RegExp; find: string | RegExp; replace: string }): esbuild.Plugin {
  return {
    name: rewrite.name,
    setup(build) {
      build.onLoad({ filter: rewrite.file }, (args) => {
        const source = readFileSync(args.path, 'utf8');
        const found = typeof rewrite.find === 'string' ? source.includes(rewrite.find) : rewrite.find.test(source);
        if (!found) throw new Error(`${args.path}: ${String(rewrite.find)} is no longer there; update ${rewrite.name} in scripts/build-runtime.ts`);
        return { contents: source.replace(rewrite.find, rewrite.replace), loader: 'js', resolveDir: path.dirname(args.path) };
      });
    },
  };
}

/**
 * esbuild escapes non-ASCII characters in strings but leaves them in regular expression literals (one `µ` in a
 * dependency's duration pattern). A main script that is not pure ASCII must be decoded from UTF-8 into a new string
 * at every start; pure ASCII can be used as it is. \uXXXX means the same character in a string, a regular
 * expression or an identifier.
 */
export function asciiOnly(code: string): string {
  return code.replace(/[\u0080-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Fetches (once, cached under .cache/) the target's Node binary from the npm registry. */
function nodeBinary(platform: PlatformEntry, version: string): string {
  const dir = path.join(root, '.cache', 'node-binaries', `${platform.node.package}-${version}`);
  const binary = path.join(dir, 'package', platform.node.binary);
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  const packed = execFileSync('npm', ['pack', `${platform.node.package}@${version}`, '--pack-destination', dir, '--silent'], {
    encoding: 'utf8',
  }).trim();
  execFileSync('tar', ['-xzf', path.join(dir, packed.split('\n').at(-1)!), '-C', dir]);
  if (!existsSync(binary)) throw new Error(`${platform.node.package}@${version} has no ${platform.node.binary}`);
  return binary;
}

/**
 * The SEA assets of a target: onnxruntime binding + library, wasmoon's wasm, and their manifest (extracted to disk at
 * run time); the gRPC contract, the inference worker's script, Swagger UI's and the gateway dashboard's files (read in
 * memory).
 */
function nativeAssets(platform: PlatformEntry, workDir: string, bundle: string): Record<string, string> {
  if (!platform.onnxruntime) {
    throw new Error(
      `${platform.target}: onnxruntime-node ${require('onnxruntime-node/package.json').version} ships no binding for this target, ` +
        'so no base runtime can be built for it (see docs/building-runtimes.md)',
    );
  }
  const ortDir = path.join(path.dirname(require.resolve('onnxruntime-node/package.json')), platform.onnxruntime.dir);
  const wasm = path.join(path.dirname(require.resolve('wasmoon/package.json')), 'dist', 'glue.wasm');
  const sources: Record<string, string> = {};
  for (const file of [platform.onnxruntime.binding, ...platform.onnxruntime.libraries]) sources[`native/${file}`] = path.join(ortDir, file);
  sources['native/glue.wasm'] = wasm;
  // the image codecs: extracted beside the others, read by each image thread (it is handed their paths)
  const imageCodecs = {} as CodecFiles;
  for (const [codec, file] of Object.entries(WASM_CODEC_FILES) as [WasmCodec, string][]) {
    imageCodecs[codec] = `image-${codec}-${path.basename(file)}`;
    sources[`native/${imageCodecs[codec]}`] = require.resolve(file);
  }

  const hash = createHash('sha256');
  const files: Record<string, string> = {};
  for (const [key, file] of Object.entries(sources)) {
    hash.update(readFileSync(file));
    files[key] = path.basename(key);
  }
  const manifest: NativeManifest = {
    hash: hash.digest('hex').slice(0, 16),
    files,
    onnxruntimeBinding: platform.onnxruntime.binding,
    luaWasm: 'glue.wasm',
    imageCodecs,
  };
  const manifestFile = path.join(workDir, NATIVE_MANIFEST_ASSET);
  writeFileSync(manifestFile, JSON.stringify(manifest));
  const swaggerUi = Object.fromEntries(SWAGGER_UI_FILES.map((file) => [swaggerUiAsset(file), require.resolve(`swagger-ui-dist/${file}`)]));
  return {
    [PROGRAM_ASSET]: bundle,
    [NATIVE_MANIFEST_ASSET]: manifestFile,
    [PROTO_ASSET]: path.join(root, 'proto', 'encoder.proto'),
    [INFERENCE_WORKER_ASSET]: workerBundleOf(bundle),
    [SQLITE_READER_ASSET]: sqliteReaderBundleOf(bundle),
    ...Object.fromEntries(Object.keys(SPLIT_BUNDLES).map((name) => [splitBundleAsset(name as SplitBundleName), splitBundleOf(bundle, name as SplitBundleName)])),
    ...swaggerUi,
    ...Object.fromEntries(DASHBOARD_FILES.map((file) => [dashboardAsset(file), dashboardFileOf(bundle, file)])),
    ...sources,
  };
}

function strip(binary: string, platform: PlatformEntry): string {
  // node.exe carries no symbols to strip (they are in separate PDB files)
  if (platform.binaryFormat === 'pe') return 'not stripped (PE: no symbols inside)';
  const tools = platform.binaryFormat === 'macho' ? ['llvm-strip'] : ['llvm-strip', platform.target === hostTarget() ? 'strip' : ''];
  for (const tool of tools.filter(Boolean)) {
    const result = spawnSync(tool, platform.binaryFormat === 'macho' ? ['-x', binary] : ['--strip-all', binary], { encoding: 'utf8' });
    if (result.status === 0) return `stripped with ${tool}`;
  }
  return 'not stripped (install llvm or binutils for the target)';
}

/** Why a target cannot be built at all, for the default all-targets run (an explicit --target fails instead). */
function reasonToSkip(platform: PlatformEntry): string | null {
  return platform.onnxruntime ? null : 'onnxruntime-node ships no binding for it';
}

/** Mach-O on a machine without codesign: everything but the signature steps, and a script that finishes on a Mac. */
function finishOnMacScript(): string {
  return [
    '#!/bin/sh',
    '# Finishes the macOS base runtime prepared on Linux: only macOS codesign can remove and add the signature.',
    'set -eu',
    'cd "$(dirname "$0")"',
    'cp node-stripped encoder',
    'codesign --remove-signature encoder',
    `npx --yes postject@1.0.0-alpha.6 encoder NODE_SEA_BLOB sea.blob --sentinel-fuse ${SEA_FUSE} --macho-segment-name NODE_SEA`,
    'codesign --sign - encoder',
    'rm node-stripped sea.blob finish-on-macos.sh',
    'echo "$(pwd)/encoder"',
    '',
  ].join('\n');
}

export async function buildRuntime(target: Target, bundle: string): Promise<string> {
  const platform = platformOf(target);
  const version = pinnedNodeVersion();
  if (process.version !== `v${version}`) {
    throw new Error(`the SEA blob must be made by Node ${version} (this is ${process.version}); run through npm run build:runtime`);
  }
  if (!platform.onnxruntime) throw new Error(reasonToSkip(platform) ?? 'no onnxruntime binding');
  const outDir = path.join(root, 'dist', 'runtime', target);
  const workDir = path.join(outDir, 'work');
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(workDir, { recursive: true });

  const blob = path.join(workDir, 'sea.blob');
  const assets = nativeAssets(platform, workDir, bundle);
  const makeBlob = (extraAssets: Record<string, string> = {}) => {
    const seaConfig = {
      main: entryBundleOf(bundle),
      output: blob,
      disableExperimentalSEAWarning: true,
      // V8's code cache is specific to the V8 build and CPU that made it: only the host's own target gets one (of the
      // small entry script here, of the program in step 5); other targets compile at start. Snapshots would need the
      // program to be snapshot-safe at build time; off.
      useCodeCache: target === hostTarget(),
      useSnapshot: false,
      // V8 starts with a small young generation and grows it as it fills: a warm `infer` scavenged three times, the
      // first (~8 ms) copying most of what the program had just made (docs/benchmarks.md, session 10). Starting at
      // 16 MiB (V8 grows it to 32 on this machine under load) a start-up's young generation is never collected; a
      // server's is at least that large after a few hundred requests anyway (+8 MiB RSS before, measured).
      execArgv: ['--min-semi-space-size=16'],
      assets: { ...assets, ...extraAssets },
    };
    writeFileSync(path.join(workDir, 'sea-config.json'), JSON.stringify(seaConfig, null, 2));
    execFileSync(process.execPath, ['--experimental-sea-config', path.join(workDir, 'sea-config.json')], { stdio: 'pipe' });
  };
  makeBlob();

  const output = path.join(outDir, `encoder${executableExtension(target)}`);
  const canSign = platform.binaryFormat !== 'macho' || process.platform === 'darwin';
  if (!canSign) {
    const node = path.join(outDir, 'node-stripped');
    copyFileSync(nodeBinary(platform, version), node);
    const stripped = strip(node, platform);
    copyFileSync(blob, path.join(outDir, 'sea.blob'));
    writeFileSync(path.join(outDir, 'finish-on-macos.sh'), finishOnMacScript(), { mode: 0o755 });
    rmSync(workDir, { recursive: true, force: true });
    console.log(
      `${target}: prepared in ${path.relative(root, outDir)} (Node ${version}, ${stripped}); macOS codesign must finish it: ` +
        `copy the folder to a Mac and run its finish-on-macos.sh`,
    );
    return outDir;
  }
  const stripped = await injectBlob(platform, version, blob, output);
  if (target === hostTarget()) {
    makeBlob(await makeProgramCodeCaches(output, workDir));
    await injectBlob(platform, version, blob, output);
  }
  rmSync(workDir, { recursive: true, force: true });
  console.log(`${target}: ${path.relative(root, output)} (${(statSync(output).size / 2 ** 20).toFixed(1)} MiB, Node ${version}, ${stripped})`);
  return output;
}

/** A fresh copy of the target's Node binary, stripped, with the SEA blob injected (and signed again on macOS). */
async function injectBlob(platform: PlatformEntry, version: string, blob: string, output: string): Promise<string> {
  copyFileSync(nodeBinary(platform, version), output);
  chmodSync(output, 0o755);
  if (platform.binaryFormat === 'macho') execFileSync('codesign', ['--remove-signature', output]);
  const stripped = strip(output, platform);
  const { inject } = require('postject') as {
    inject: (file: string, name: string, data: Buffer, options: { sentinelFuse: string; machoSegmentName?: string }) => Promise<void>;
  };
  await inject(output, 'NODE_SEA_BLOB', readFileSync(blob), {
    sentinelFuse: SEA_FUSE,
    ...(platform.binaryFormat === 'macho' ? { machoSegmentName: 'NODE_SEA' } : {}),
  });
  if (platform.binaryFormat === 'macho') execFileSync('codesign', ['--sign', '-', output]);
  return stripped;
}

/**
 * Step 5: builds a tiny model with the fresh executable and runs it with WRITE_CODE_CACHE_ENV set, in a cache
 * directory of its own: `infer` once; `serve` on a loopback port until it answered GET /health and a POST /predict,
 * stopped with SIGTERM. Returns the SEA assets of V8's code caches of the program those runs wrote.
 */
async function makeProgramCodeCaches(executable: string, workDir: string): Promise<Record<string, string>> {
  const modelDir = path.join(workDir, 'code-cache-model');
  await writeModelDirectory(modelDir, PRESETS.tiny);
  const config = path.join(workDir, 'code-cache-model.yaml');
  writeFileSync(config, `encoder:\n  name: code-cache-model\n  path: ${JSON.stringify(modelDir)}\n  model_type: embedding\n`);
  const model = path.join(workDir, 'code-cache-model.bin');
  const env = { ...process.env, ENCODER_CACHE_DIR: path.join(workDir, 'cache') };
  execFileSync(executable, ['build', '-f', config, '-o', model, '--base-binary-path', executable], { env, stdio: 'pipe' });
  const runs: Record<CodeCacheRun, (env: NodeJS.ProcessEnv) => Promise<void>> = {
    infer: async (runEnv) => void execFileSync(model, ['infer', 'The quick brown fox jumps over the lazy dog.'], { env: runEnv, stdio: 'pipe' }),
    serve: (runEnv) => serveOnce(model, runEnv),
  };
  const assets: Record<string, string> = {};
  for (const run of CODE_CACHE_RUNS) {
    const cache = path.join(workDir, programCodeCacheAsset(run));
    await runs[run]({ ...env, [WRITE_CODE_CACHE_ENV]: cache });
    if (!existsSync(cache)) throw new Error(`the ${run} run wrote no code cache to ${cache}`);
    assets[programCodeCacheAsset(run)] = cache;
  }
  return assets;
}

/** `serve` on a free loopback port until it answered GET /health and POST /predict once, then SIGTERM (bounded). */
async function serveOnce(executable: string, env: NodeJS.ProcessEnv): Promise<void> {
  const child = spawn(executable, ['serve', '--http-hostname', '127.0.0.1', '--http-port', '0', '--grpc-hostname', '127.0.0.1', '--grpc-port', '0'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  let stderr = '';
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const match = /HTTP {2}(http:\/\/\S+)/.exec(stderr);
        if (match) resolve(match[1]);
      });
      void exited.then((code) => reject(new Error(`serve exited with ${code} before listening: ${stderr}`)));
    });
    for (const [route, init] of [['/health', {}], ['/predict', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"inputs":["hello"],"normalize":true}' }]] as const) {
      const response = await fetch(`${url}${route}`, init);
      if (!response.ok) throw new Error(`serve answered ${route} with ${response.status}: ${await response.text()}`);
    }
  } finally {
    child.kill('SIGTERM');
    await exited;
    clearTimeout(timer);
  }
  // the cache is written when the process exits: only a clean stop wrote it
  if (child.exitCode !== 0) throw new Error(`serve did not stop cleanly (exit ${child.exitCode}): ${stderr}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const options = new Command('build-runtime')
    .description('Build the Node SEA base runtime `encoder` (default: every target this machine can build)')
    .option('--target <triple...>', `targets: ${TARGETS.join(', ')}, "host" (this machine's), or "all"`)
    .parse()
    .opts<{ target?: string[] }>();
  const explicit = options.target && !options.target.includes('all');
  const targets = explicit ? options.target!.map((t) => (t === 'host' ? hostTarget() : parseTarget(t))) : [...TARGETS];
  const bundle = path.join(root, 'dist', 'runtime', 'main.cjs');
  await bundleRuntime(bundle);
  let failed = 0;
  for (const target of targets) {
    const skip = explicit ? null : reasonToSkip(platformOf(target));
    if (skip) {
      console.log(`${target}: skipped, ${skip}`);
      continue;
    }
    try {
      await buildRuntime(target, bundle);
    } catch (error) {
      failed++;
      console.error(`${target}: ${(error as Error).message}`);
    }
  }
  process.exitCode = failed ? 1 : 0;
}
