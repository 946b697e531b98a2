import { hostTarget } from '../../src/builder/targets.ts';
import { installedSwaggerUiFile, repositoryProtoText, sourceDashboardFiles, sourceInferenceWorker, sourceSqliteReader } from '../../src/cli/installed-files.ts';
import { runCli, type CliContext } from '../../src/cli/program.ts';

/** What src/cli/main.ts gives the command line when it runs from source. */
export const sourceContext: CliContext = {
  protoText: repositoryProtoText,
  swaggerUiFiles: installedSwaggerUiFile,
  dashboardFiles: sourceDashboardFiles,
  inferenceWorker: sourceInferenceWorker,
  sqliteReader: sourceSqliteReader,
  target: hostTarget(),
};

/** Runs the command line in-process and captures what it prints; `stdin`, when given, is its standard input (text as UTF-8). */
export async function runCliCaptured(argv: string[], options: { stdin?: string | Uint8Array } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(
    argv,
    {
      stdout: (text) => {
        stdout += text;
      },
      stderr: (text) => {
        stderr += text;
      },
      ...(options.stdin !== undefined ? { readStdin: async () => Buffer.from(options.stdin!) } : {}),
    },
    sourceContext,
  );
  return { code, stdout, stderr };
}

/** `serve --config <config> args` in-process, expected to be refused as a usage or configuration error (exit 2); its stderr. */
export async function serveRefusal(config: string, args: string[]): Promise<string> {
  const { code, stderr } = await runCliCaptured(['serve', '--config', config, '--http-port', '0', '--grpc-port', '0', ...args]);
  if (code !== 2) throw new Error(`expected exit 2, got ${code}; stderr:\n${stderr}`);
  return stderr;
}
