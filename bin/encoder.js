#!/usr/bin/env node
// Runs the command line from source. The project pins Node 26 (devDependency `node`), which runs
// TypeScript directly by stripping types; npm scripts and `npx` put that Node first on the PATH.
const [major] = process.versions.node.split('.').map(Number);
if (major < 23) {
  console.error(`encoder: Node ${process.versions.node} cannot run the TypeScript sources; run it through npm (npx encoder …), which uses the pinned Node 26.`);
  process.exit(1);
}
await import('../src/cli/main.ts');
