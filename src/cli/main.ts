import { runCli } from './program.ts';

// The command-line entry: `npx encoder …`, `node src/cli/main.ts …`, and later the single executable.
process.exitCode = await runCli(process.argv.slice(2));
