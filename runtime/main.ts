/**
 * The program of the single executable (evaluated by its entry, sea-entry.ts). With an asset section at the end of its
 * own file it is a model (`./model infer|serve|inspect`); without one it is the builder (`encoder build|infer --config`).
 */
import { createModelProgram } from '../src/cli/model-program.ts';
import { createProgram, dropOutputOfClosedPipes, EXIT_INPUT_ERROR, processIo, runProgram, type CliContext } from '../src/cli/program.ts';
import { isEncoderError } from '../src/encoder/errors.ts';
import { AssetSection } from './asset-section.ts';
import * as sea from 'node:sea';
import { hostTarget } from '../src/builder/targets.ts';
import { INFERENCE_WORKER_ASSET, nativeFiles, PROTO_ASSET, SQLITE_READER_ASSET, swaggerUiAsset } from './native-assets.ts';
import type { InferenceWorkerData } from './onnxruntime-binding.ts';
import { traceStartup } from '../src/shared/startup-trace.ts';
import { takePrestartedInferenceWorker } from './onnxruntime-warm-up.ts';
import { exitWithoutTeardown } from './exit-without-teardown.ts';
import { DASHBOARD_FILES, dashboardAsset, type DashboardFiles } from '../src/gateway/dashboard/files.ts';

async function main(argv: string[]): Promise<number> {
  traceStartup('program loaded (Node start-up, bundle compiled and evaluated)');
  const io = processIo;
  let section: AssetSection | null;
  try {
    section = await AssetSection.open(process.execPath);
  } catch (error) {
    if (!isEncoderError(error)) throw error;
    io.stderr(`error: ${process.execPath}: ${error.message}\n`);
    return EXIT_INPUT_ERROR;
  }
  traceStartup(section ? 'asset section read' : 'no asset section (base runtime)');
  let native: ReturnType<typeof nativeFiles>;
  try {
    native = nativeFiles();
  } catch (error) {
    if (!isEncoderError(error)) throw error;
    io.stderr(`error: ${error.message}\n`); // a cache directory nowhere writable: one line, not a stack
    await section?.close();
    return EXIT_INPUT_ERROR;
  }
  const context: CliContext = {
    // wasmoon's glue.wasm, extracted: for the check of a transform at load, and (in their load message) for the Lua
    // runtime of each inference worker, whose bundle cannot find it beside wasmoon's script
    luaWasmPath: native?.luaWasm,
    imageCodecFiles: native?.imageCodecs,
    // Without model assets this executable is the base runtime of its own target and version: `build` needs nothing else.
    hostBase: () => (section === null ? { path: process.execPath, target: hostTarget(), kind: 'self' } : undefined),
    inferenceWorker: () => ({
      script: sea.getAsset(INFERENCE_WORKER_ASSET, 'utf8'),
      eval: true,
      workerData: { onnxruntimeBinding: native!.onnxruntimeBinding } satisfies InferenceWorkerData,
      prestarted: takePrestartedInferenceWorker,
    }),
    protoText: () => sea.getAsset(PROTO_ASSET, 'utf8'),
    swaggerUiFiles: (file) => new Uint8Array(sea.getAsset(swaggerUiAsset(file))),
    sqliteReader: () => ({ script: sea.getAsset(SQLITE_READER_ASSET, 'utf8'), eval: true }),
    dashboardFiles: async () => Object.fromEntries(DASHBOARD_FILES.map((file) => [file, new Uint8Array(sea.getAsset(dashboardAsset(file)))])) as DashboardFiles,
    target: section?.manifest.target ?? hostTarget(),
  };
  if (section) {
    try {
      return await runProgram(createModelProgram(section, io, context), argv, io);
    } finally {
      await section.close();
    }
  }
  const program = createProgram(io, context);
  if (argv.length === 0) {
    io.stderr('This is the encoder base runtime: it holds no model assets. Build a model with it:\n\n');
    io.stderr(program.helpInformation());
    return EXIT_INPUT_ERROR;
  }
  return runProgram(program, argv, io);
}

dropOutputOfClosedPipes();
const argv = process.argv.slice(2);
main(argv).then(
  async (code) => {
    process.exitCode = code;
    // a successful `infer` has written everything: its process need not free what onnxruntime and V8 hold
    if (code === 0 && argv[0] === 'infer') await exitWithoutTeardown();
  },
  (error: unknown) => {
    process.stderr.write(`internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
