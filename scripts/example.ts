/**
 * npm run example — the quick start's main job on an embedded default: generate the example model, build the
 * base runtime of this machine, pack the model into one executable with it, and run that executable's infer.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRESETS, writeModelDirectory } from './model-generator/index.ts';
import { hostTarget } from '../src/builder/targets.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const run = (file: string, args: string[]) => execFileSync(file, args, { cwd: root, stdio: 'inherit' });

console.log('1. generating the example model into examples/model');
await writeModelDirectory(path.join(root, 'examples', 'model'), PRESETS.example);

console.log(`2. building the base runtime for ${hostTarget()}`);
run(process.execPath, [path.join(root, 'scripts', 'build-runtime.ts'), '--target', 'host']);

console.log('3. packing the model into one executable: examples/example-embedder');
const base = path.join(root, 'dist', 'runtime', hostTarget(), 'encoder');
const executable = path.join(root, 'examples', 'example-embedder');
run(base, ['build', '-f', 'encoder.example.yaml', '--base-binary-path', base, '-o', executable]);

console.log('4. running it: examples/example-embedder infer "The quick brown fox" "jumps over the lazy dog"');
run(executable, ['infer', 'The quick brown fox', 'jumps over the lazy dog']);
