import { hostTarget } from '../builder/targets.ts';
import { installedSwaggerUiFile, repositoryBaseRuntime, repositoryProtoText, sourceDashboardFiles, sourceInferenceWorker, sourceSqliteReader } from './installed-files.ts';
import { reexecWithMallocTuning } from '../shared/malloc-tuning.ts';
import { dropOutputOfClosedPipes, processIo, runCli } from './program.ts';

// The command-line entry from source (`npx encoder …`, `node src/cli/main.ts …`); the single executable's is
// runtime/main.ts. From source, the gRPC contract and Swagger UI are read from the repository and its packages, and
// the gateway dashboard is bundled from its sources.
reexecWithMallocTuning(process.argv.slice(2));
dropOutputOfClosedPipes();
process.exitCode = await runCli(process.argv.slice(2), processIo, {
  protoText: repositoryProtoText,
  swaggerUiFiles: installedSwaggerUiFile,
  dashboardFiles: sourceDashboardFiles,
  inferenceWorker: sourceInferenceWorker,
  sqliteReader: sourceSqliteReader,
  hostBase: repositoryBaseRuntime,
  target: runningTarget(),
});

/** This machine's target triple; on a platform without base runtimes, its Node name (infer and serve still work). */
function runningTarget(): string {
  try {
    return hostTarget();
  } catch {
    return `${process.platform}-${process.arch}`;
  }
}
