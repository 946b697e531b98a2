// Builds the installable Hub package in packages/hub (its `prepack` runs this; `npm run build:lib` too): compiles
// src/hub to JavaScript with declarations into packages/hub/dist, then checks that packages/hub/package.json declares
// exactly the packages the compiled code imports, at the versions package.json pins (what this repository installs
// and tests), so the package's dependencies can neither miss one nor drag in the app's (no model runtime). See
// docs/hub.md, "The package".

import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import path from 'node:path';
import ts from 'typescript';

const root = path.resolve(import.meta.dirname, '..');
const packageDir = path.join(root, 'packages', 'hub');

interface Manifest {
  version: string;
  dependencies?: Record<string, string>;
}

const readManifest = (file: string): Manifest => JSON.parse(readFileSync(file, 'utf8')) as Manifest;

/** The package a bare import specifier names (`@scope/name/sub` → `@scope/name`); undefined for relative and builtin ones. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('node:') || builtinModules.includes(specifier)) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/**
 * Every package the files under `dir` import: the JavaScript (statically or with a literal dynamic import) and the
 * declarations (a type a consumer's compiler must find).
 */
export function importedPackages(dir: string): Set<string> {
  const found = new Set<string>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !/\.(js|d\.ts)$/.test(entry.name)) continue;
    const source = readFileSync(path.join(entry.parentPath, entry.name), 'utf8');
    for (const imported of ts.preProcessFile(source, true, true).importedFiles) {
      const name = packageOf(imported.fileName);
      if (name) found.add(name);
    }
  }
  return found;
}

/** What is wrong with the package's declared dependencies; empty when they are the imported packages at the app's pins. */
export function dependencyProblems(declared: Record<string, string>, imported: Set<string>, pinned: Record<string, string>): string[] {
  const problems: string[] = [];
  for (const name of [...imported].sort()) {
    if (!(name in declared)) problems.push(`${name} is imported by src/hub but not a dependency in packages/hub/package.json`);
  }
  for (const [name, version] of Object.entries(declared)) {
    if (!imported.has(name)) problems.push(`${name} is a dependency in packages/hub/package.json but src/hub does not import it`);
    else if (pinned[name] !== version) problems.push(`${name} is ${version} in packages/hub/package.json but ${pinned[name] ?? 'absent'} in package.json`);
  }
  return problems;
}

function build(): void {
  const manifest = readManifest(path.join(packageDir, 'package.json'));
  const app = readManifest(path.join(root, 'package.json'));
  const problems = manifest.version === app.version ? [] : [`version is ${manifest.version} in packages/hub/package.json but ${app.version} in package.json`];

  const outDir = path.join(packageDir, 'dist');
  rmSync(outDir, { recursive: true, force: true }); // no stale file of a deleted source in the tarball
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', path.join(packageDir, 'tsconfig.json')], { stdio: 'inherit' });

  problems.push(...dependencyProblems(manifest.dependencies ?? {}, importedPackages(outDir), app.dependencies ?? {}));
  if (problems.length > 0) {
    console.error(`packages/hub/package.json does not match the code:\n  ${problems.join('\n  ')}`);
    process.exit(1);
  }
}

if (import.meta.main) build();
