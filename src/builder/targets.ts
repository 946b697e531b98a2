import aarch64Darwin from '../../platforms/aarch64-apple-darwin/platform.json' with { type: 'json' };
import aarch64Linux from '../../platforms/aarch64-unknown-linux-gnu/platform.json' with { type: 'json' };
import x86_64Darwin from '../../platforms/x86_64-apple-darwin/platform.json' with { type: 'json' };
import x86_64Windows from '../../platforms/x86_64-pc-windows-msvc/platform.json' with { type: 'json' };
import x86_64Linux from '../../platforms/x86_64-unknown-linux-gnu/platform.json' with { type: 'json' };
import { ConfigError } from '../encoder/errors.ts';

/** The target triples of spec 2's prebuilt base runtimes. */
export const TARGETS = [
  'x86_64-unknown-linux-gnu',
  'aarch64-unknown-linux-gnu',
  'x86_64-apple-darwin',
  'aarch64-apple-darwin',
  'x86_64-pc-windows-msvc',
] as const;
export type Target = (typeof TARGETS)[number];

/** What makes a target's base runtime: `platforms/<triple>/platform.json`. */
export interface PlatformEntry {
  target: Target;
  node: { package: string; binary: string };
  /** null: onnxruntime-node ships no binding for this target, so it has no base runtime. */
  onnxruntime: { package: string; dir: string; binding: string; libraries: string[] } | null;
  binaryFormat: 'elf' | 'macho' | 'pe';
}

const PLATFORMS = {
  'x86_64-unknown-linux-gnu': x86_64Linux,
  'aarch64-unknown-linux-gnu': aarch64Linux,
  'x86_64-apple-darwin': x86_64Darwin,
  'aarch64-apple-darwin': aarch64Darwin,
  'x86_64-pc-windows-msvc': x86_64Windows,
} as Record<Target, PlatformEntry>;

export function platformOf(target: Target): PlatformEntry {
  return PLATFORMS[target];
}

const HOST_TARGETS: Record<string, Target> = {
  'linux-x64': 'x86_64-unknown-linux-gnu',
  'linux-arm64': 'aarch64-unknown-linux-gnu',
  'darwin-x64': 'x86_64-apple-darwin',
  'darwin-arm64': 'aarch64-apple-darwin',
  'win32-x64': 'x86_64-pc-windows-msvc',
};

/** The target of the machine this runs on; a ConfigError on a platform without a base runtime. */
export function hostTarget(platform: string = process.platform, arch: string = process.arch): Target {
  const target = HOST_TARGETS[`${platform}-${arch}`];
  if (!target) {
    throw new ConfigError(`no base runtime for this platform (${platform}-${arch}); targets: ${TARGETS.join(', ')}`);
  }
  return target;
}

/** Checks a `--platform` value. */
export function parseTarget(value: string): Target {
  if (!(TARGETS as readonly string[]).includes(value)) {
    throw new ConfigError(`unknown platform "${value}"; allowed values: ${TARGETS.join(', ')}`);
  }
  return value as Target;
}

/** A ConfigError when no base runtime can exist for the target. */
export function requireBuildableTarget(target: Target): void {
  if (!platformOf(target).onnxruntime) {
    throw new ConfigError(
      `${target} has no base runtime: onnxruntime-node 1.30 ships no binding for it (see docs/building-runtimes.md)`,
    );
  }
}

/** File name extension of executables for a target: `.exe` on Windows. */
export function executableExtension(target: Target): string {
  return target.includes('windows') ? '.exe' : '';
}
