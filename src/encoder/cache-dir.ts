import os from 'node:os';
import path from 'node:path';

/* The cache directory, apart from the build configuration: the single executable's native files are found through it
 * at start-up, before the configuration's parser (yaml, ajv) needs to be evaluated. */

/** Environment variable naming the cache directory (base runtimes for builds, extracted native files). */
export const CACHE_DIR_ENV = 'ENCODER_CACHE_DIR';

/** `ENCODER_CACHE_DIR`, else the platform's per-user cache directory. */
export function cacheDirFromEnvironment(env: NodeJS.ProcessEnv = process.env): string {
  return env[CACHE_DIR_ENV] || defaultCacheDir(env);
}

/** The platform's per-user cache directory for this program. */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string {
  const home = env.HOME ?? os.homedir();
  if (platform === 'darwin') return path.join(home, 'Library', 'Caches', 'encoder');
  if (platform === 'win32') return path.win32.join(env.LOCALAPPDATA ?? path.win32.join(home, 'AppData', 'Local'), 'encoder');
  return path.join(env.XDG_CACHE_HOME || path.join(home, '.cache'), 'encoder');
}

/**
 * The temporary directory's per-user folder, for a cache directory that is not writable. By process.getuid, not
 * os.userInfo(), which throws for a user id without a passwd entry (containers run as arbitrary ids).
 */
export function fallbackCacheRoot(): string {
  return path.join(os.tmpdir(), process.getuid ? `encoder-${process.getuid()}` : 'encoder');
}
