import os from 'node:os';
import path from 'node:path';

/* The cache directory, apart from the build configuration: the single executable's native files are found through it
 * at start-up, before the configuration's parser (yaml, ajv) needs to be evaluated. */

/** Environment variable naming the cache directory (base runtimes for builds, extracted native files). */
export const CACHE_DIR_ENV = 'ENCODER_CACHE_DIR';

/** `ENCODER_CACHE_DIR`, else the platform's per-user cache directory, else (no home directory) the temporary one's. */
export function cacheDirFromEnvironment(env: NodeJS.ProcessEnv = process.env): string {
  return env[CACHE_DIR_ENV] || defaultCacheDir(env) || fallbackCacheRoot();
}

/**
 * The platform's per-user cache directory for this program, or null when there is none: no home directory (a user id
 * without a passwd entry and no HOME, as containers run) and, on Linux, no XDG_CACHE_HOME. `XDG_CACHE_HOME` comes
 * before the home directory, which is then not needed; an empty HOME is no home (not the working directory).
 */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string | null {
  if (platform === 'win32') {
    const local = env.LOCALAPPDATA || withHome(env, (home) => path.win32.join(home, 'AppData', 'Local'));
    return local ? path.win32.join(local, 'encoder') : null;
  }
  if (platform === 'darwin') return withHome(env, (home) => path.join(home, 'Library', 'Caches', 'encoder'));
  // the XDG base directory specification ignores a relative path
  if (env.XDG_CACHE_HOME && path.isAbsolute(env.XDG_CACHE_HOME)) return path.join(env.XDG_CACHE_HOME, 'encoder');
  return withHome(env, (home) => path.join(home, '.cache', 'encoder'));
}

function withHome(env: NodeJS.ProcessEnv, under: (home: string) => string): string | null {
  const home = homeDirectory(env);
  return home ? under(home) : null;
}

function homeDirectory(env: NodeJS.ProcessEnv): string | null {
  if (env.HOME !== undefined) return env.HOME || null;
  try {
    return os.homedir() || null;
  } catch {
    return null; // libuv's passwd lookup fails for a user id without an entry
  }
}

/**
 * The temporary directory's per-user folder, for a cache directory that is not writable. By process.getuid, not
 * os.userInfo(), which throws for a user id without a passwd entry (containers run as arbitrary ids).
 */
export function fallbackCacheRoot(): string {
  return path.join(os.tmpdir(), process.getuid ? `encoder-${process.getuid()}` : 'encoder');
}
