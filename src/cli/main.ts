import { readFileSync } from 'node:fs';
import { hostTarget } from '../builder/targets.ts';
import { processIo, runCli } from './program.ts';

// The command-line entry from source (`npx encoder …`, `node src/cli/main.ts …`); the single executable's is
// runtime/main.ts. From source, the gRPC contract is read from the repository.
process.exitCode = await runCli(process.argv.slice(2), processIo, {
  protoText: () => readFileSync(new URL('../../proto/encoder.proto', import.meta.url), 'utf8'),
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
